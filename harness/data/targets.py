"""How many targets of a batch the loss counts, read from the host's copy of the batch (the
loader's output, before it moves to the device): the micro-batch weights need the numbers,
and reading them there stalls nothing."""
from __future__ import annotations

import torch


def target_shares(targets: list[torch.Tensor], ignore_index: int | None) -> list[float] | None:
    """Each micro-batch's share of the update's counted targets (those not `ignore_index`):
    weighting micro-batch means by it gives the mean over every counted target, however the
    padding falls. None when no target counts (an empty update)."""
    counts = [y.numel() if ignore_index is None else int((y != ignore_index).sum()) for y in targets]
    total = sum(counts)
    return [c / total for c in counts] if total else None
