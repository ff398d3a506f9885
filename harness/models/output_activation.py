"""The activation that makes a model's output: what it can produce, for the diagnosis, and the
`output_activation` key that replaces it, on any model (a user's too).

An output activation is one called after the model's last layer with weights. Whether it suits
the task depends on what reads it: a regression loss needs a range that holds the targets (a
sigmoid cannot predict a price); a cross-entropy on logits needs no activation at all; a model
that turns its output into probabilities itself (a sigmoid for one unit, a softmax over classes)
needs a probability there, and a softmax over a single unit is the constant 1 whatever its input.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from harness.core.errors import ConfigError
from harness.models.activation_trace import ActivationTrace, replace_module

REPLACEMENTS: dict[str, Callable[[], nn.Module]] = {
    "identity": nn.Identity,
    "sigmoid": nn.Sigmoid,
    "softmax": lambda: nn.Softmax(dim=1),  # over the class dimension, as PyTorch's losses place it
}
INF = math.inf
FIXED_RANGES: dict[type[nn.Module], tuple[float, float]] = {
    nn.Sigmoid: (0.0, 1.0), nn.Hardsigmoid: (0.0, 1.0), nn.Softmax: (0.0, 1.0), nn.Tanh: (-1.0, 1.0),
    nn.ReLU: (0.0, INF), nn.ReLU6: (0.0, 6.0), nn.Softplus: (0.0, INF), nn.SELU: (-1.7581, INF),
    nn.GELU: (-0.17, INF), nn.SiLU: (-0.2785, INF), nn.LogSoftmax: (-INF, 0.0), nn.LogSigmoid: (-INF, 0.0),
}


def validate_output_activation(value: object) -> None:
    if value is not None and value not in REPLACEMENTS:
        raise ConfigError("output_activation", value, f"null or one of {list(REPLACEMENTS)}")


def output_range(module: nn.Module) -> tuple[float, float]:
    """The values the activation can produce (-inf, inf for one that bounds nothing)."""
    if isinstance(module, nn.Hardtanh):
        return float(module.min_val), float(module.max_val)
    if isinstance(module, nn.ELU):
        return -float(module.alpha), INF
    return next((r for kind, r in FIXED_RANGES.items() if isinstance(module, kind)), (-INF, INF))


def _softmax_size(module: nn.Softmax | nn.LogSoftmax, output: torch.Tensor) -> int:
    """The size of the dimension the softmax normalises over (an implicit dim as torch picks it)."""
    dim = module.dim if module.dim is not None else (0 if output.dim() in (0, 1, 3) else 1)
    return output.shape[dim] if output.dim() else 1


def describe_output(model: nn.Module, trace: ActivationTrace) -> dict[str, Any] | None:
    """summary.json's `output_activation`: the last activation called after the last layer with
    weights, its range (None for an unbounded end), whether it is a softmax over one unit, whether
    the loss reads its values as they are, and its width beside the output's; None when the output
    has no activation."""
    if not trace.output:
        return None
    name, value = trace.output[-1]
    module = model.get_submodule(name)
    low, high = output_range(module)
    final = trace.final
    read_by_loss = final is not None and final.numel() == value.numel() and \
        torch.equal(final.reshape(-1), value.reshape(-1))
    return {"module": name, "type": type(module).__name__,
            "low": low if math.isfinite(low) else None, "high": high if math.isfinite(high) else None,
            "single_unit_softmax": isinstance(module, (nn.Softmax, nn.LogSoftmax)) and _softmax_size(module, value) == 1,
            "read_by_loss": bool(read_by_loss), "units": _width(value),
            "values_per_sample": int(value[0].numel()) if value.dim() else 1,
            "output_units": _width(final) if final is not None else None}


def _width(tensor: torch.Tensor) -> int:
    """Values per sample along the class dimension (1 for a vector of one value per sample)."""
    return int(tensor.shape[1]) if tensor.dim() > 1 else 1


def replace_output_activation(model: nn.Module, target: str | None, trace: ActivationTrace) -> list[str]:
    """The last output activation becomes REPLACEMENTS[target], any output activations before it
    identities; returns what was replaced ("head.act: Sigmoid -> Identity"). A model with no output
    activation module has nothing to replace: identity is then what it already has, and a sigmoid
    or softmax is refused (it would silently change nothing)."""
    if target is None or (not trace.output and target == "identity"):
        return []
    if not trace.output:
        raise ConfigError("output_activation", target, f"null or identity: {type(model).__name__} calls no "
                                                       "activation module after its last layer with weights, so "
                                                       "there is none to replace (one written as a function in "
                                                       "forward, such as torch.sigmoid(x), cannot be; make it a "
                                                       "module, or add the activation to the model)")
    names = list(dict.fromkeys(name for name, _ in trace.output))
    replaced = []
    for name in names[:-1]:
        replaced += replace_module(model, name, nn.Identity())
    value = trace.output[-1][1]
    if target == "softmax" and value.dim() > 2 and value.shape[1] == 1:  # [B, 1, K]: the classes are last
        return replaced + replace_module(model, names[-1], nn.Softmax(dim=-1))
    return replaced + replace_module(model, names[-1], REPLACEMENTS[target]())

