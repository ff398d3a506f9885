"""A sweep trial's intermediate values go to the study at each eval: the value its objective follows
(val/f1 for best_val_f1, val/loss/recon for final_val_loss_recon; else the monitor), so the pruner
judges the metric the sweep optimises; the sweep's pruner may stop the trial there (all ranks agree)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from harness.loop.callbacks.base import Callback
from harness.core.distributed import all_reduce_min
from harness.loop.hooks import Stop, Tick
from harness.loop.step import StepResult
from harness.loop.callbacks.sweep_trial import TrialReporter

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer


class SweepReport(Callback):
    priority = 50

    def __init__(self, reporter: TrialReporter, reported: str) -> None:
        self.reporter, self.reported = reporter, reported  # the logged name reported at each eval

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> Stop | None:
        value = trainer.state.last_eval.get(self.reported)
        if not tick.eval or value is None:
            return None
        self.reporter.report(value, trainer.state.step)
        flag = torch.tensor(0.0 if self.reporter.should_prune() else 1.0, device=trainer.device)
        if all_reduce_min(flag, trainer.dist).item() == 0.0:
            trainer.event("pruned", f"step {trainer.state.step}: the sweep's pruner stopped this trial")
            return Stop("pruned")
        return None
