"""What a built-in task logs beside its loss without a line of config: a multi-label model under
`loss.function=bce` its label accuracy (each label's logit on the side of its 0/1 target), token
data its perplexity (exp of the val loss, which is already the exact mean over every token).
Classification's accuracy is counted with the loss (harness/loop/evaluation.py)."""
from __future__ import annotations

import math
from typing import Any

import torch

from harness.core.distributed import DistInfo
from harness.core.metric_names import VAL_LABEL_ACCURACY, VAL_PREFIX
from harness.training.metrics.measure import FunctionMetric

LABEL_ACCURACY = VAL_LABEL_ACCURACY.removeprefix(VAL_PREFIX)  # logged as val/label_accuracy


def label_accuracy(output: torch.Tensor, batch: tuple[Any, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Labels whose logit is on the side of its target (> 0 where the target is >= 0.5), over every label."""
    agree = (output > 0) == (batch[1] >= 0.5)
    return {"sum": agree.sum(), "count": torch.tensor(agree.numel())}


def task_metrics(task: str, loss_function: str | None, open_objective: bool, device: torch.device,
                 dist: DistInfo) -> list[FunctionMetric]:
    if open_objective or loss_function != "bce":
        return []
    return [FunctionMetric(LABEL_ACCURACY, label_accuracy, {}, "max", device, dist, "loss.function", "bce")]


def perplexity(loss: float) -> float:
    """exp(loss) of a mean token cross-entropy; inf where that overflows a float."""
    return math.exp(loss) if loss < 700 else math.inf
