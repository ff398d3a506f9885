"""Numerical gradient check: autograd's gradient against central finite differences, in float64.

For each parameter tensor, the directional derivative of the loss along a random unit direction
is computed both ways. A custom autograd Function with a wrong backward, or a path that is
partly cut by .detach(), shows up as a mismatch on the tensors it feeds, by name. Our own models
are rebuilt small (SHRINK) so the check takes milliseconds; other models are copied as they are.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from harness.modes.doctor.result import Outcome, Status
from harness.modes.doctor.sampling import read, sample_indices
from harness.models import build_model
from harness.models.init import apply_init
from harness.assembly.assemble import Assembly
from harness.training.loss import REGRESSION_LOSSES

SHRINK = {"n_layer": 2, "n_head": 2, "n_embd": 16, "depth": 2, "width": 16}  # upper bounds per size key
TINY_SAMPLES, TINY_BLOCK = 2, 8
EPS = 1e-6  # float64 central differences: truncation ~EPS^2, rounding ~1e-16/EPS, both far below RTOL
# Agreement is ~1e-8 relative when the backward is right; a wrong one is off by tens of percent.
RTOL = 1e-4
# Rounding leaves ~1e-16 * loss / EPS (~1e-9 for losses near 10) in a central difference: a
# derivative that is truly zero (a bias feeding a BatchNorm, which cancels it) reads as that much.
ATOL = 1e-7
MAX_TENSORS = 32  # evenly spaced over the model when it has more
MAX_COPY_PARAMS = 50_000_000  # a float64 copy of a larger model costs more memory than a pre-flight check should


def tiny_model(built: Assembly) -> nn.Module:
    """A float64 CPU model of the configured kind: rebuilt smaller when it has a typed Config, else copied."""
    spec, meta = built.config.model, built.meta
    if not _rebuildable(built):
        return copy.deepcopy(built.raw_model).to("cpu", torch.float64).train()
    small = {k: min(getattr(spec.config, k), bound) for k, bound in SHRINK.items() if hasattr(spec.config, k)}
    if meta.block_size is not None:
        meta = dataclasses.replace(meta, block_size=min(meta.block_size, TINY_BLOCK))
    with torch.random.fork_rng(devices=[]):  # the run's own RNG stream stays where it was
        torch.manual_seed(built.config.run.seed)
        model = build_model(dataclasses.replace(spec, config=dataclasses.replace(spec.config, **small)), meta)
        apply_init(model, built.config.init)
    return model.to("cpu", torch.float64).train()


def _rebuildable(built: Assembly) -> bool:
    """Our models carry a typed Config whose size keys can be shrunk; others are opaque."""
    return built.config.model.config is not None


def _loss64(output: torch.Tensor, target: torch.Tensor, task: str, function: str | None = None) -> torch.Tensor:
    """The task's loss kept in float64 (the training loss casts to float32 on purpose)."""
    if task == "regression":
        return REGRESSION_LOSSES[function or "mse"](output.reshape(target.shape), target.double())
    return F.cross_entropy(output.reshape(-1, output.size(-1)), target.reshape(-1))


def _tiny_batch(built: Assembly) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = read(built, built.train_set, sample_indices(built.train_set, TINY_SAMPLES))
    if built.meta.task == "lm":
        x, y = x[:, :TINY_BLOCK], y[:, :TINY_BLOCK]
    return (x.double() if x.is_floating_point() else x), y


@torch.no_grad()
def _derivatives(p: nn.Parameter, direction: torch.Tensor, loss: Callable[[], torch.Tensor]) -> tuple[float, float]:
    """(autograd, central difference) derivative of the loss along `direction`; `p` is left as it was."""
    analytic = (p.grad * direction).sum().item()
    p += EPS * direction
    up = loss().item()
    p -= 2 * EPS * direction
    down = loss().item()
    p += EPS * direction
    return analytic, (up - down) / (2 * EPS)


def check_gradients(built: Assembly) -> Outcome:
    if built.meta.user_loss is not None:  # a float64 copy of the user's batch and objective is theirs to make
        return Outcome(Status.SKIP, f"loss {built.meta.user_loss}: the float64 check runs on the built-in losses")
    n_params = sum(p.numel() for p in built.raw_model.parameters())
    if not _rebuildable(built) and n_params > MAX_COPY_PARAMS:
        return Outcome(Status.SKIP, f"{n_params / 1e6:.0f}M parameters: too large for a float64 copy")
    model, (x, y) = tiny_model(built), _tiny_batch(built)

    def loss() -> torch.Tensor:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # the same dropout mask in every evaluation
            return _loss64(built.pick_output(model(x)), y, built.meta.task, built.meta.loss_function)

    loss().backward()
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad and p.grad is not None]
    named = named[:: max(1, -(-len(named) // MAX_TENSORS))]
    g = torch.Generator().manual_seed(0)
    worst, bad = 0.0, []
    for name, p in named:
        direction = torch.randn(p.shape, generator=g, dtype=p.dtype)
        analytic, numeric = _derivatives(p, direction / direction.norm(), loss)
        share = abs(analytic - numeric) / (ATOL + RTOL * max(abs(analytic), abs(numeric)))  # > 1: out of tolerance
        worst = max(worst, share)
        if share > 1:
            bad.append(f"{name} ({analytic:.3g} vs {numeric:.3g})")
    if bad:
        return Outcome(Status.FAIL, f"autograd vs finite differences disagree on {', '.join(bad)}",
                       "a backward pass is wrong upstream of these tensors: check custom autograd Functions, "
                       "in-place ops on saved tensors, and .detach() in the middle of a computation")
    size = sum(p.numel() for p in model.parameters())
    return Outcome(Status.PASS, f"{len(named)} tensors of a {size:,}-parameter copy; worst disagreement "
                                f"{worst:.2g} x the tolerance ({ATOL:g} + {RTOL:g} x |derivative|)")
