"""The loop's extension seam: each job around the update (checkpoints, evals, the guard's
verdicts, logging, live diagnosis, sweep pruning, a user's own) is a callback with hooks, a
priority and, when it has state to keep, its own entry in the checkpoint."""
