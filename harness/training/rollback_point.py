"""The guard's own rollback point: a copy of the training state in host memory, refreshed every
`guard.snapshot_every` steps while no bad update is pending.

Why not the last checkpoint: checkpoints are written every `trainer.ckpt_every` steps (200 by
default, often thousands on a big run), so a rollback to one could undo that many good updates,
all of them at step 0 before the first. A snapshot bounds the loss to `snapshot_every` +
`rollback_window` steps whatever the checkpoint cadence, and costs no disk I/O: one host copy of
the model, optimizer and data position (3x the parameters for Adam), taken at a step the host
reads anyway. `guard.snapshot_every=null` keeps nothing and rolls back to checkpoints."""
from __future__ import annotations

from typing import Any

import torch


def host_copy(obj: Any) -> Any:
    """A deep copy with every tensor cloned to the CPU: later updates cannot reach it."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: host_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(host_copy(v) for v in obj)
    return obj


class RollbackPoint:
    def __init__(self, every: int | None) -> None:
        self.every = every
        self.step: int | None = None
        self.state: dict[str, Any] | None = None

    def due(self, step: int, bad_pending: bool) -> bool:
        """Whether to take a snapshot now: on cadence, and only of a state no bad update is near."""
        return self.every is not None and not bad_pending and (self.step is None or step - self.step >= self.every)

    def take(self, state: dict[str, Any], step: int) -> None:
        self.state, self.step = host_copy(state), step

    def newer_than(self, step: int | None) -> bool:
        return self.state is not None and (step is None or self.step > step)
