"""Drive the trainer's own `train_step` at an LR we choose, and put everything back afterwards.

The LR range test and the doctor's overfit check both need real updates (accumulation,
clipping, precision, the guard) at a fixed LR, without the schedule and without leaving a
trace: the trainer's full state is snapshotted to the CPU first and loaded back at the end.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator

import torch

from harness.rollback_point import host_copy
from harness.trainer import Trainer

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class _LossRecorder:
    """Wraps `trainer.loss_fn`: an update's loss is its micro-batch losses weighted by their
    sample counts, as the trainer weights them."""

    def __init__(self, loss_fn: LossFn) -> None:
        self.loss_fn = loss_fn
        self.parts: list[tuple[torch.Tensor, int]] = []

    def __call__(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = self.loss_fn(output, target)
        self.parts.append((loss.detach(), target.shape[0]))
        return loss

    def pop(self) -> float:
        """The last update's loss (one host read); clears the record for the next update."""
        total = sum(n for _, n in self.parts)
        loss = sum(value * (n / total) for value, n in self.parts)
        self.parts.clear()
        return float(loss)


class StepDriver:
    """Real optimizer updates at a chosen `optim.lr`; get one from `driven(trainer)`."""

    def __init__(self, trainer: Trainer, recorder: _LossRecorder) -> None:
        self.trainer, self.recorder = trainer, recorder
        self.reference_lr = reference_lr(trainer)
        # each param group keeps its ratio to `optim.lr` (e.g. Muon's AdamW groups at lr/20)
        self.ratios = [base / self.reference_lr for base in trainer.scheduler.base_lrs]

    def step(self, lr: float) -> float:
        """One `train_step` with `optim.lr` = lr; returns that update's training loss, or NaN when
        the guard skipped the update for a non-finite loss or gradient."""
        for group, ratio in zip(self.trainer.optimizer.param_groups, self.ratios):
            group["lr"] = lr * ratio
        skipped = self.trainer.state.skipped_steps
        self.trainer.train_step()  # its scheduler.step() resets the LR; the next call sets it again
        self.trainer.state.step += 1  # as `fit` counts: faults, monitors and guard events see true step numbers
        self.trainer.hear_guard()
        loss = self.recorder.pop()
        return math.nan if self.trainer.state.skipped_steps > skipped else loss


def reference_lr(trainer: Trainer) -> float:
    """The LR that `optim.lr` names, which a suggestion is expressed in."""
    lr = trainer.cfg.optim.get("lr")
    return float(lr) if lr is not None else float(trainer.scheduler.base_lrs[0])


@contextlib.contextmanager
def driven(trainer: Trainer) -> Iterator[StepDriver]:
    """A StepDriver; on exit the model, optimizer, scheduler, scaler, RNG, data position,
    counters, loss function and batch source are exactly what they were on entry."""
    snapshot = host_copy(trainer.state_dict())
    batches, recorder = trainer.batches, _LossRecorder(trainer.loss_fn)
    trainer.loss_fn = recorder
    try:
        yield StepDriver(trainer, recorder)
    finally:
        trainer.loss_fn, trainer.batches = recorder.loss_fn, batches
        trainer.optimizer.zero_grad(set_to_none=True)
        trainer.load_state_dict(snapshot)
