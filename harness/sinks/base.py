"""What every sink is told about the run it records."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RunInfo:
    run_dir: Path
    config: dict[str, Any]  # the resolved config
    resume_step: int = 0  # a resumed run logs from here on
    study: str | None = None  # a sweep trial's study name
    trial: int | None = None  # its number in the study

    @property
    def sweep_dir(self) -> Path | None:
        """Where a sweep's trials keep their run dirs (each trial's is SWEEP_DIR/N)."""
        return self.run_dir.parent if self.study is not None else None


# A run's status (summary.json) as trackers file it: finished, failed or killed.
FAILED_STATUSES = ("diverged", "sick", "failed")
KILLED_STATUSES = ("preempted", "interrupted")
