"""Drive the trainer's own update at an LR we choose, and put everything back afterwards.

The LR range test and the doctor's overfit check both need real updates (accumulation,
clipping, precision, the guard) at a fixed LR, without the schedule and without leaving a
trace: the trainer's full state is snapshotted to the CPU first and loaded back at the end.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from harness.training.rollback_point import host_copy
from harness.loop.step import BatchSource
from harness.loop.trainer import Trainer

class StepDriver:
    """Real optimizer updates at a chosen `optim.lr`; get one from `driven(trainer)`."""

    def __init__(self, trainer: Trainer, batches: BatchSource | None) -> None:
        self.trainer, self.batches = trainer, batches
        self.reference_lr = reference_lr(trainer)
        # each param group keeps its ratio to `optim.lr` (e.g. Muon's AdamW groups at lr/20)
        self.ratios = [base / self.reference_lr for base in trainer.built.live_lr.base_lrs]

    def step(self, lr: float) -> float:
        """One `train_step` with `optim.lr` = lr; returns that update's training loss, or NaN when
        the guard skipped the update for a non-finite loss or gradient."""
        self.trainer.built.live_lr.fix([lr * ratio for ratio in self.ratios])
        skipped = self.trainer.state.skipped_steps
        result = self.trainer.update(self.batches)  # it advances the schedule, which resets the LR; the next call fixes it again
        self.trainer.settle()
        loss = float(result.loss)
        return math.nan if self.trainer.state.skipped_steps > skipped else loss


def reference_lr(trainer: Trainer) -> float:
    """The LR that `optim.lr` names, which a suggestion is expressed in."""
    lr = trainer.cfg.optim.get("lr")
    return float(lr) if lr is not None else float(trainer.built.live_lr.base_lrs[0])


@contextlib.contextmanager
def driven(trainer: Trainer, batches: BatchSource | None = None) -> Iterator[StepDriver]:
    """A StepDriver that trains on `batches` (the run's own when None); on exit the model,
    optimizer, scheduler, scaler, RNG, data position and counters are exactly what they were
    on entry."""
    snapshot = host_copy(trainer.state_dict())
    try:
        yield StepDriver(trainer, batches)
    finally:
        trainer.built.optimizer.zero_grad(set_to_none=True)
        trainer.load_state_dict(snapshot)
