"""What a run leaves on disk and must never lose: checkpoints (atomic, checksummed, sharded), the run dir's claim and its lock."""
