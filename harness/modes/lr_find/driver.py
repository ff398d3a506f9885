"""Drive the trainer's own update at an LR we choose, and put everything back afterwards.

The LR range test and the doctor's overfit check both need real updates (accumulation,
clipping, precision, the guard) at a fixed LR, without the schedule and without leaving a
trace: the trainer's full state is snapshotted to the CPU first and loaded back at the end.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from harness.assembly.assemble import Assembly
from harness.loop.step import BatchSource
from harness.training.rollback_point import host_copy


class StepDriver:
    """Real optimizer updates at a chosen `optim.lr`; get one from `driven(built)`."""

    def __init__(self, built: Assembly, batches: BatchSource | None) -> None:
        self.built, self.batches = built, batches
        self.reference_lr = reference_lr(built)
        # each param group keeps its ratio to `optim.lr` (e.g. Muon's AdamW groups at lr/20)
        self.ratios = [base / self.reference_lr for base in built.live_lr.base_lrs]

    def step(self, lr: float) -> float:
        """One `train_step` with `optim.lr` = lr; returns that update's training loss, or NaN when
        the guard skipped the update for a non-finite loss or gradient."""
        self.built.live_lr.fix([lr * ratio for ratio in self.ratios])
        trainer = self.built.trainer
        skipped = trainer.state.skipped_steps
        result = trainer.update(self.batches)  # it advances the schedule, which resets the LR; the next call fixes it again
        trainer.settle()
        loss = float(result.loss)
        return math.nan if trainer.state.skipped_steps > skipped else loss


def reference_lr(built: Assembly) -> float:
    """The LR that `optim.lr` names, which a suggestion is expressed in."""
    lr = built.config.optim.options.get("lr")
    return float(lr) if lr is not None else float(built.live_lr.base_lrs[0])


@contextlib.contextmanager
def driven(built: Assembly, batches: BatchSource | None = None) -> Iterator[StepDriver]:
    """A StepDriver that trains on `batches` (the run's own when None); on exit the model,
    optimizer, scheduler, scaler, RNG, data position and counters are exactly what they were
    on entry."""
    snapshot = host_copy(built.trainer.state_dict())
    try:
        yield StepDriver(built, batches)
    finally:
        built.optimizer.zero_grad(set_to_none=True)
        built.trainer.load_state_dict(snapshot)
