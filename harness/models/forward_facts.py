"""What one forward and backward of the untrained model on the first micro-batch shows before
training: whether its output depends on its input, whether any gradient leaves the loss (and where
it stops when none reaches a weight), and the first module whose output went non-finite on finite
inputs (a module, or the forward's own code between them).

A constant output (a softmax or log-softmax over one unit, a softmax along a dimension of size 1,
a saturated final activation) passes no gradient back, so every unit behind it looks dead: the
cause is the output. A module that is constant by its form stays constant on any input; a
saturated one varies again once its inputs are brought to unit scale, so the cause there is the
scale of what feeds it (raw inputs, a large init). A module that overflows (an exponential
activation on large pre-activations) makes the loss non-finite whatever the LR.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from harness.data.batch import tensors

# A value that differs from the first sample's by less than this share of the output's largest
# magnitude is the same value: float32 rounds a saturated sigmoid to exactly 1, a softmax over one
# unit is exactly 1, and a varying output differs by far more.
SAME = 1e-6


def _first_batched(value: Any, batch: int) -> torch.Tensor | None:
    """The first floating-point tensor in `value` whose leading dimension is the batch."""
    return next((t for t in tensors(value) if t.is_floating_point() and t.dim() and t.shape[0] == batch), None)


def _varies(t: torch.Tensor) -> bool:
    """Whether the samples of a batched tensor differ (beyond rounding)."""
    flat = t.detach().reshape(t.shape[0], -1).float()
    scale = float(flat.abs().max())
    return bool(scale > 0) and float((flat - flat[:1]).abs().max()) > SAME * scale


def forward_facts(model: nn.Module, loss_of: Callable[[], torch.Tensor], batch: int) -> dict[str, Any] | None:
    """summary.json's `forward`: `loss_of()` runs the model on the first micro-batch and returns its
    loss. Measured in eval mode with the RNG streams untouched and no `.grad` written. None for a
    batch of one sample (nothing to compare)."""
    if batch < 2:
        return None
    calls: list[dict[str, Any]] = []  # per module call with a batched output, in the order the calls end
    inputs: dict[str, bool] = {}
    probing: list[bool] = []  # set while a module is called again on rescaled inputs: not a call of the forward

    def record(module: nn.Module, args: tuple, kwargs: dict, output: Any, name: str) -> None:
        out = _first_batched(output, batch)
        if out is None or probing:
            return
        given = _first_batched((args, kwargs), batch)
        finite = bool(torch.isfinite(out).all())
        call = {"module": name, "type": type(module).__name__, "varies": finite and _varies(out), "finite": finite,
                "input_finite": given is None or bool(torch.isfinite(given).all()),
                "input_max": float(given.detach().abs().max()) if given is not None and given.numel() else None,
                "weights": any(True for _ in module.parameters(recurse=False)), "gradient": 0.0}
        if (finite and not call["varies"] and name and not call["weights"] and given is not None
                and given.shape == out.shape and _varies(given)):  # an element-wise activation, flat on varying inputs
            probing.append(True)
            try:
                call["saturated"] = _varies_at_unit_scale(module, args, kwargs, given, batch)
            finally:
                probing.pop()
        if out.requires_grad:
            out.register_hook(lambda g, call=call: call.update(gradient=float(g.detach().abs().max())))
        calls.append(call)
        if name == "":
            inputs["varies"] = given is None or _varies(given)
            inputs["value"] = float(out.detach().reshape(-1)[0]) if finite else None
            inputs["bounds"] = _held_at_bounds(out) if finite else None

    hooks = [module.register_forward_hook(lambda m, a, k, o, name=name: record(m, a, k, o, name), with_kwargs=True)
             for name, module in model.named_modules()]
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        with untouched(model):
            loss = loss_of()
            grads = torch.autograd.grad(loss, params, allow_unused=True) if loss.requires_grad and params else ()
    finally:
        for hook in hooks:
            hook.remove()
    norm = math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads if g is not None))
    root = next((c for c in calls if c["module"] == ""), None)
    facts: dict[str, Any] = {"loss_finite": bool(torch.isfinite(loss).all()),
                             "gradient_norm": norm if math.isfinite(norm) else None,
                             "inputs_vary": inputs.get("varies", True), "constant_output": None, "nonfinite": None,
                             "output_bounds": inputs.get("bounds")}
    if root is not None and root["finite"] and not root["varies"] and facts["inputs_vary"]:
        facts["constant_output"] = {**_where_constant(calls), "value": inputs.get("value")}
    facts["nonfinite"] = _where_nonfinite(calls)
    facts["gradient_stop"] = _where_gradient_stops(calls) if norm == 0 and facts["loss_finite"] else None
    return facts


def _varies_at_unit_scale(module: nn.Module, args: tuple, kwargs: dict, given: torch.Tensor, batch: int) -> bool:
    """Whether a weightless module whose output was constant on an input that varied gives varying
    outputs once that input is scaled to a largest magnitude of 1: a saturated activation does, a
    softmax over a dimension of size 1 never does."""
    scaled = given.detach() / given.detach().abs().max()
    swapped = tuple(scaled if a is given else a for a in args)
    with torch.no_grad():
        out = _first_batched(module(*swapped, **kwargs), batch)
    return out is not None and bool(torch.isfinite(out).all()) and _varies(out)


def _where_nonfinite(calls: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first module whose output went non-finite on finite inputs; else the model itself (module
    "") when its output did while every module it called returned finite values: the forward's own
    code (a log of a value <= 0, a division by zero), after `after`, the last module it called."""
    keys = ("module", "type", "input_max")
    inner = next((c for c in calls if not c["finite"] and c["input_finite"] and c["module"]), None)
    if inner is not None:
        return {k: inner[k] for k in keys}
    root = next((c for c in calls if c["module"] == ""), None)
    if root is None or root["finite"] or not root["input_finite"]:
        return None
    last = next((c for c in reversed(calls) if c["module"]), None)
    return {**{k: root[k] for k in keys}, "after": last["module"] if last else None,
            "after_type": last["type"] if last else None}


def _held_at_bounds(out: torch.Tensor) -> dict[str, float] | None:
    """How many of the output's values sit exactly at the batch's lowest or its highest value,
    counted where two or more do, and in how many of a sample's positions (its classes) they do: a
    continuous output ties there by chance almost never, an output through a ReLU or a clamp does
    for every value it cuts off, in any class (and passes those no gradient). A model that gives
    every sample the same output ties too, but each class at its own value."""
    per_sample = out.detach().float().reshape(out.shape[0], -1)
    if per_sample.numel() < 2:
        return None
    low, high = per_sample.min(), per_sample.max()
    if low == high:
        return None
    facts: dict[str, float] = {"low": float(low), "high": float(high), "values": int(per_sample.numel())}
    for side, bound in (("low", low), ("high", high)):
        at = per_sample == bound
        ties = int(at.sum())
        facts[f"share_{side}"] = ties / per_sample.numel() if ties > 1 else 0.0
        facts[f"positions_{side}"] = int(at.any(0).sum())
    return facts


def _where_gradient_stops(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the loss's gradient ends, when no weight gets any: `reached` is the deepest module call
    whose output still got a gradient ("" the model's own output; None not even that), and
    `last_layer` the last module with weights the forward called (the output layer)."""
    reached = next((c for c in calls if c["gradient"] > 0), None)
    last = next((c for c in reversed(calls) if c["weights"]), None)
    return {"reached": reached["module"] if reached else None, "reached_type": reached["type"] if reached else None,
            "last_layer": last["module"] if last else None, "last_layer_type": last["type"] if last else None}


def _where_constant(calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The last module whose output still varied and the first after it whose output did not (None:
    the forward's own code, not a module, made it constant), with the largest magnitude of its input
    and whether it is saturated (varies on that input at unit scale)."""
    last = max((i for i, c in enumerate(calls) if c["varies"] and c["module"]), default=None)
    after = calls[last + 1:] if last is not None else calls
    culprit = next((c for c in after if c["module"] and not c["varies"]), None)
    return {"after": calls[last]["module"] if last is not None else None,
            "after_type": calls[last]["type"] if last is not None else None,
            "module": culprit["module"] if culprit else None, "type": culprit["type"] if culprit else None,
            "input_max": culprit["input_max"] if culprit else None,
            "saturated": bool(culprit and culprit.get("saturated"))}


def untrained_losses(model: nn.Module, losses: list[Callable[[], torch.Tensor]]) -> list[float]:
    """The untrained model's loss on a few batches (each `losses` entry scores one), in eval mode,
    without gradients and with the RNG streams untouched: how widely its losses spread before any
    update, which the blow-up test measures a first window's peak against."""
    with torch.no_grad(), untouched(model):
        return [float(loss_of()) for loss_of in losses]


@contextlib.contextmanager
def untouched(model: nn.Module) -> Iterator[None]:
    """Eval mode (no dropout draws, no batch-norm statistics updated) with the RNG streams forked:
    the run that follows starts exactly as it would have without the measurement."""
    training = model.training
    try:
        model.eval()
        with torch.random.fork_rng(devices=[]):
            yield
    finally:
        model.train(training)
