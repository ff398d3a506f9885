"""Loss per task, computed in float32 whatever the autocast dtype (softmax in bf16 loses the tail).

Targets equal to the ignore index (PyTorch's -100 by default: padding, prompt tokens, unlabeled
samples) count nowhere: not in the loss, its mean, the z-loss, accuracy or the priors. A
micro-batch whose targets are all ignored has loss 0, not 0/0."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from harness.core.typed_config import read_typed, setting, within

TORCH_IGNORE_INDEX = -100  # what F.cross_entropy ignores unless told otherwise


@dataclass(frozen=True)
class LossConfig:
    label_smoothing: float = setting(0.0, "a number in [0, 1)", within(0.0, 1.0, high_open=True))
    z_loss: float = setting(0.0, "a number >= 0", within(0.0, math.inf, high_open=True))
    ignore_index: int | None = setting(TORCH_IGNORE_INDEX, "an integer target value to leave out (-100: PyTorch's) "
                                                           "or null (every target counts)")


def loss_config(cfg: DictConfig) -> LossConfig:
    return read_typed(cfg, LossConfig, "loss")


def compute_loss(output: torch.Tensor, target: torch.Tensor, task: str, label_smoothing: float = 0.0,
                 z_loss: float = 0.0, ignore_index: int | None = None) -> torch.Tensor:
    """The mean loss over the counted targets."""
    if task == "regression":  # [B, 1] predictions for [B] targets must not broadcast to [B, B]
        return F.mse_loss(output.float().reshape(target.shape), target.float())
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
                    ignore_index: int | None = None) -> torch.Tensor:
    """Each sample's own loss ([B]: a sequence's mean over its counted tokens; 0 when it has
    none), to tell one bad sample from a bad batch."""
    if task == "regression":
        return F.mse_loss(output.float().reshape(target.shape), target.float(), reduction="none").reshape(
            len(target), -1).mean(1)
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
