"""What a job does (mode=train/eval/doctor/lr_find) and diagnose.remedy=auto's attempts; they build through harness.config and harness.assembly."""
