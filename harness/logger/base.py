"""The sink seam: what every sink is told about the run it records (`RunInfo`) and the calls it
takes (`Sink`)."""
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


class Sink:
    """A place metrics go. The Tracker makes these calls on every sink; `log` is the one each sink
    must define, the others do nothing unless a sink has a use for them."""

    def log(self, step: int, scalars: dict[str, float], kind: str) -> None:
        """One row of scalars at `step`; `kind` is "train" or "eval"."""
        raise NotImplementedError

    def histograms(self, step: int, tensors: dict[str, Any]) -> None:
        """Weight and gradient tensors to draw as histograms."""

    def text(self, tag: str, message: str, step: int) -> None:
        """A line of text (a finding, a warning) at `step`."""

    def finish(self, summary: dict[str, Any]) -> None:
        """The run is over and its files are written: file them and the run's status."""

    def close(self) -> None:
        """Release what the sink holds; called once, after `finish` when the run got that far."""
