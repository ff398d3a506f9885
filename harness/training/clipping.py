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

from harness.core.errors import ConfigError
from harness.core.shards import is_dtensor, local, tensor_norms
from harness.core.validation import is_number

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
    """L2 norm over all gradients, left on the device (no host sync). Sharded gradients (fsdp)
    give a replicated DTensor: its one reduction over the ranks makes it the norm of the whole."""
    grads = grads_of(params)
    if not grads:
        return torch.zeros(())
    norm = nn.utils.get_total_norm(grads, foreach=True)
    return norm.full_tensor() if is_dtensor(norm) else norm


def clip_gradients(params: list[nn.Parameter], mode: str, clip: float, total_norm: torch.Tensor) -> None:
    """Clip in place; `total_norm` is the already-computed global norm (reused by mode=norm)."""
    if mode == "norm":
        nn.utils.clip_grads_with_norm_(params, clip, total_norm, foreach=True)
    elif mode == "value":
        nn.utils.clip_grad_value_(params, clip, foreach=True)
    elif mode == "layer":
        _layer_clip(params, clip)
    else:
        _adaptive_clip(params, clip)


@torch.no_grad()
def _layer_clip(params: list[nn.Parameter], clip: float) -> None:
    """Each tensor's gradient norm <= clip (clip_grad_norm_'s coefficient, per tensor); the norms of
    sharded gradients are reduced in one collective."""
    grads = grads_of(params)
    if not grads:
        return
    coefs = (clip / (tensor_norms(grads) + 1e-6)).clamp(max=1.0)
    torch._foreach_mul_([local(g) for g in grads], list(coefs.to(grads[0].device).unbind()))


@torch.no_grad()
def _adaptive_clip(params: list[nn.Parameter], clip: float) -> None:
    """Unit-wise: a weight's rows are its output units. Sharded tensors are split by rows, so each
    rank clips its own rows exactly; a 1-d tensor is one unit, its norms reduced over the ranks."""
    with_grad = [p for p in params if p.grad is not None]
    flat = [p for p in with_grad if p.ndim <= 1]
    flat_w, flat_g = tensor_norms([p.detach() for p in flat]), tensor_norms([p.grad for p in flat])
    row = {id(p): i for i, p in enumerate(flat)}
    for p in with_grad:
        if p.ndim > 1:
            dims = tuple(range(1, p.ndim))
            w_norm = local(p.detach()).float().norm(dim=dims, keepdim=True)
            g_norm = local(p.grad).float().norm(dim=dims, keepdim=True)
        else:
            w_norm, g_norm = flat_w[row[id(p)]], flat_g[row[id(p)]]
        max_norm = clip * w_norm.clamp_min(AGC_EPS)
        scale = torch.where(g_norm > max_norm, max_norm / g_norm.clamp_min(1e-6), torch.ones_like(g_norm))
        local(p.grad).mul_(scale.to(p.grad.dtype))
