"""Loss per task, computed in float32 whatever the autocast dtype (softmax in bf16 loses the tail).

Targets equal to the ignore index (PyTorch's -100 by default: padding, prompt tokens, unlabeled
samples) count nowhere: not in the loss, its mean, the z-loss, accuracy or the priors. A
micro-batch whose targets are all ignored has loss 0, not 0/0."""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from harness.core.typed_config import one_of, read_typed, setting, within
from harness.data.standardize import TargetScale
from harness.data.targets import AUTO
from harness.training.objective import MODEL_LOSS, TARGET_KEY, ObjectiveSpec, objective_spec

TORCH_IGNORE_INDEX = -100  # what F.cross_entropy ignores unless told otherwise


# Losses for real-valued targets (data.task=regression), by `loss.function`. Each takes the model's
# outputs as they are: predictions for the distances, logits for bce (multi-label, soft or per-pixel
# targets in [0, 1]: the sigmoid is in the loss, as in BCEWithLogitsLoss).
REGRESSION_LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "mse": F.mse_loss,
    "l1": F.l1_loss,
    "huber": F.huber_loss,  # delta 1: squared below 1, linear above
    "bce": F.binary_cross_entropy_with_logits,
}
LOSS_FUNCTIONS = (AUTO, *REGRESSION_LOSSES, MODEL_LOSS)


@dataclass(frozen=True)
class LossConfig:
    function: str = setting(AUTO, "auto (cross-entropy for classes and tokens, mse for real-valued targets), mse, "
                                  "l1, huber, bce or model (the loss the model returns)", one_of(LOSS_FUNCTIONS))
    label_smoothing: float = setting(0.0, "a number in [0, 1)", within(0.0, 1.0, high_open=True))
    z_loss: float = setting(0.0, "a number >= 0", within(0.0, math.inf, high_open=True))
    ignore_index: int | None = setting(TORCH_IGNORE_INDEX, "an integer target value to leave out (-100: PyTorch's) "
                                                           "or null (every target counts)")


def loss_config(cfg: DictConfig) -> tuple[LossConfig, ObjectiveSpec | None]:
    """The built-in loss's settings, and the open objective the node names (None: the built-in loss).
    With `loss._target_`, the keys the harness does not read are the objective's own settings."""
    harness_keys = tuple(f.name for f in fields(LossConfig))
    known = cfg if cfg.get(TARGET_KEY) is None else {k: v for k, v in cfg.items() if k in harness_keys}
    return read_typed(known, LossConfig, "loss"), objective_spec(cfg, harness_keys)


def compute_loss(output: torch.Tensor, target: torch.Tensor, task: str, label_smoothing: float = 0.0,
                 z_loss: float = 0.0, ignore_index: int | None = None, function: str | None = None,
                 target_scale: TargetScale | None = None) -> torch.Tensor:
    """The mean loss over the counted targets (`function`: the regression loss, mse when None).
    With a `target_scale`, its value is the loss in the targets' units and its gradient the loss's in
    standard units: what a model trained on standardised targets gets."""
    if task == "regression":  # [B, 1] predictions for [B] targets must not broadcast to [B, B]
        loss = REGRESSION_LOSSES[function or "mse"]
        prediction, target = output.float().reshape(target.shape), target.float()
        if target_scale is None:
            return loss(prediction, target)
        standard = loss(target_scale(prediction), target_scale(target))
        return standard + (loss(prediction, target) - standard).detach()
    logits = output.float().reshape(-1, output.size(-1))
    target = target.reshape(-1)
    ignore = TORCH_IGNORE_INDEX if ignore_index is None else ignore_index
    counted = target != ignore
    n = counted.sum().clamp(min=1)
    loss = F.cross_entropy(logits, target, ignore_index=ignore, label_smoothing=label_smoothing, reduction="sum") / n
    if z_loss:
        loss = loss + z_loss * (torch.logsumexp(logits, dim=-1).pow(2) * counted).sum() / n
    return loss


def per_sample_loss(output: torch.Tensor, target: torch.Tensor, task: str,
                    ignore_index: int | None = None, function: str | None = None) -> torch.Tensor:
    """Each sample's own loss ([B]: a sequence's mean over its counted tokens; 0 when it has
    none), to tell one bad sample from a bad batch."""
    if task == "regression":
        return REGRESSION_LOSSES[function or "mse"](output.float().reshape(target.shape), target.float(),
                                                    reduction="none").reshape(len(target), -1).mean(1)
    ignore = TORCH_IGNORE_INDEX if ignore_index is None else ignore_index
    logits = output.float().reshape(-1, output.size(-1))
    losses = F.cross_entropy(logits, target.reshape(-1), ignore_index=ignore, reduction="none").reshape(len(target), -1)
    counted = (target != ignore).reshape(len(target), -1).sum(1).clamp(min=1)
    return losses.sum(1) / counted


def counted_targets(target: torch.Tensor, ignore_index: int | None) -> torch.Tensor:
    """Which targets the loss counts (all of them without an ignore index, as for regression)."""
    if ignore_index is None:
        return torch.ones(target.shape, dtype=torch.bool, device=target.device)
    return target != ignore_index
