"""Every component of a run built from its config group and wired into a Trainer."""
