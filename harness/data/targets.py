"""How the loss reads targets: which loss real-valued targets get (`loss.function`), and how many
targets of a batch it counts, read from the host's copy of the batch (the loader's output, before
it moves to the device): the micro-batch weights need the numbers, and reading them there stalls
nothing."""
from __future__ import annotations

import torch

from harness.core.errors import ConfigError

AUTO = "auto"  # cross-entropy for classes and tokens, mse for real-valued targets


def regression_loss(function: str, task: str) -> str | None:
    """The loss real-valued targets get (`loss.function`, auto: mse); None for the other tasks, whose
    loss is the cross-entropy: a distance or bce asked of them is an error."""
    if task != "regression":
        if function != AUTO:
            raise ConfigError("loss.function", function, "auto for classification and language modelling (the "
                                                         "cross-entropy); mse, l1, huber and bce take real-valued "
                                                         "targets (data.task=regression)")
        return None
    return "mse" if function == AUTO else function


def target_counts(targets: list[torch.Tensor], ignore_index: int | None) -> list[int]:
    """How many targets of each micro-batch count (those not `ignore_index`)."""
    return [y.numel() if ignore_index is None else int((y != ignore_index).sum()) for y in targets]


def target_shares(targets: list[torch.Tensor], ignore_index: int | None) -> list[float] | None:
    """Each micro-batch's share of the update's counted targets (those not `ignore_index`):
    weighting micro-batch means by it gives the mean over every counted target, however the
    padding falls. None when no target counts (an empty update)."""
    counts = target_counts(targets, ignore_index)
    total = sum(counts)
    return [c / total for c in counts] if total else None
