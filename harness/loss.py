"""Loss per task, computed in float32 whatever the autocast dtype (softmax in bf16 loses the tail)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from harness.errors import ConfigError


def validate_loss_config(cfg: DictConfig) -> None:
    if not 0.0 <= float(cfg.label_smoothing) < 1.0:
        raise ConfigError("loss.label_smoothing", cfg.label_smoothing, "a number in [0, 1)")
    if not 0.0 <= float(cfg.z_loss) < math.inf:
        raise ConfigError("loss.z_loss", cfg.z_loss, "a number >= 0")


def compute_loss(output: torch.Tensor, target: torch.Tensor, task: str,
                 label_smoothing: float = 0.0, z_loss: float = 0.0) -> torch.Tensor:
    if task == "regression":  # [B, 1] predictions for [B] targets must not broadcast to [B, B]
        return F.mse_loss(output.float().reshape(target.shape), target.float())
    logits = output.float().reshape(-1, output.size(-1))
    loss = F.cross_entropy(logits, target.reshape(-1), label_smoothing=label_smoothing)
    if z_loss:
        loss = loss + z_loss * torch.logsumexp(logits, dim=-1).pow(2).mean()
    return loss


def per_sample_loss(output: torch.Tensor, target: torch.Tensor, task: str) -> torch.Tensor:
    """Each sample's own loss ([B]: a sequence's mean over its tokens), to tell one bad sample
    from a bad batch."""
    if task == "regression":
        return F.mse_loss(output.float().reshape(target.shape), target.float(), reduction="none").reshape(
            len(target), -1).mean(1)
    logits = output.float().reshape(-1, output.size(-1))
    return F.cross_entropy(logits, target.reshape(-1), reduction="none").reshape(len(target), -1).mean(1)
