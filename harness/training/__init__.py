"""The components one config group each builds: optimizer, schedule, clipping, precision, loss, guard, monitor, faults, early stop, LR scaling, parallelism; FLOPs and blame for skipped updates."""
