"""Gradient clipping: what the top-level `clip` bounds depends on `clip_mode`.

norm      global L2 norm of all gradients <= clip (torch.nn.utils.clip_grad_norm_)
value     every gradient element in [-clip, clip]
layer     each parameter tensor's gradient norm <= clip
adaptive  unit-wise AGC (Brock et al. 2021): each output unit's gradient norm
          <= clip * max(its weight norm, 1e-3); typical clip 0.01-0.1
"""
from __future__ import annotations

import math

import torch
from torch import nn

from harness.errors import ConfigError
from harness.validation import is_number

MODES = ("norm", "value", "layer", "adaptive")
AGC_EPS = 1e-3


def validate_clip(clip: object, mode: object) -> None:
    if clip is not None and (not is_number(clip) or not 0 <= clip < math.inf):
        raise ConfigError("clip", clip, "null or 0 (off), or a number > 0")
    if mode not in MODES:
        raise ConfigError("clip_mode", mode, f"one of {list(MODES)}")


def grads_of(params: list[nn.Parameter]) -> list[torch.Tensor]:
    return [p.grad for p in params if p.grad is not None]


def global_grad_norm(params: list[nn.Parameter]) -> torch.Tensor:
    """L2 norm over all gradients, left on the device (no host sync)."""
    grads = grads_of(params)
    if not grads:
        return torch.zeros(())
    return nn.utils.get_total_norm(grads, foreach=True)


def clip_gradients(params: list[nn.Parameter], mode: str, clip: float, total_norm: torch.Tensor) -> None:
    """Clip in place; `total_norm` is the already-computed global norm (reused by mode=norm)."""
    if mode == "norm":
        nn.utils.clip_grads_with_norm_(params, clip, total_norm, foreach=True)
    elif mode == "value":
        nn.utils.clip_grad_value_(params, clip, foreach=True)
    elif mode == "layer":
        for p in params:
            if p.grad is not None:
                nn.utils.clip_grad_norm_(p, clip, foreach=True)
    else:
        _adaptive_clip(params, clip)


@torch.no_grad()
def _adaptive_clip(params: list[nn.Parameter], clip: float) -> None:
    for p in params:
        if p.grad is None:
            continue
        dims = tuple(range(1, p.ndim)) if p.ndim > 1 else None
        w_norm = p.detach().float().norm(dim=dims, keepdim=True).clamp_min(AGC_EPS)
        g_norm = p.grad.float().norm(dim=dims, keepdim=True)
        max_norm = clip * w_norm
        scale = torch.where(g_norm > max_norm, max_norm / g_norm.clamp_min(1e-6), torch.ones_like(g_norm))
        p.grad.mul_(scale.to(p.grad.dtype))
