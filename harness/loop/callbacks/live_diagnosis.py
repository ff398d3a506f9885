"""The diagnosis rules at each eval, on the metrics so far (rank 0 keeps them in memory): a new
critical finding is printed once and logged as an event; under diagnose.abort_on it stops the
run, as `diverged` for a diverging loss and `sick` for any other finding (all ranks agree).
`abort_on=remedy` stops only for a finding that carries a remedy (diagnose.remedy=auto)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from harness.loop.callbacks.base import Callback
from harness.diagnosis.live import DiagnoseSettings, LiveDiagnosis
from harness.core.distributed import any_rank
from harness.loop.hooks import Stop, Tick
from harness.loop.step import StepResult

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer


class LiveDiagnosisCallback(Callback):
    priority = 70  # after best.pt, before early stopping

    def __init__(self, settings: DiagnoseSettings) -> None:
        self.settings = settings
        self.live: LiveDiagnosis | None = None

    def on_fit_start(self, trainer: Trainer) -> None:
        """Every rank: rank 0 judges, all agree on a stop. Findings reported before a resume stay reported."""
        reported = {e["finding"] for e in trainer.state.events if e["kind"] == "diagnosis" and "finding" in e}
        history = trainer.tracker.history if trainer.tracker else None
        self.live = LiveDiagnosis(trainer.run_dir, history, self.settings, reported)

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> Stop | None:
        if not tick.eval or self.live is None:
            return None
        stop, by = None, None
        if trainer.dist.is_main and self.live.history is not None:  # the metrics it logs are what the rules read
            for finding in self.live.new_findings(trainer.summary("running")):
                trainer.event("diagnosis", f"step {trainer.state.step}: {finding.headline()} (evidence and fix: "
                                           f"report.md)", finding=finding.name, detail=finding.summary_line())
                if self.live.abort_on and stop is None and (self.live.abort_on == "critical" or finding.remedy):
                    stop = "diverged" if finding.name == "diverging" else "sick"
                    by = {"finding": finding.name, "severity": finding.severity.value, "step": trainer.state.step}
        if self.live.abort_on and any_rank(stop is not None, trainer.dist, trainer.device):
            return Stop(stop or "sick", by=by)  # rank 0 names the finding; its summary is the run's
        return None
