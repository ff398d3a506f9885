"""`activation_swap`: replace the activation modules of a built model, any model (a user's too),
by another activation. `diagnose.remedy=auto` uses it against dead ReLUs and saturating sigmoid or
tanh stacks without knowing the model's own keys.

Only modules can be swapped: a `torch.relu` call inside a forward stays what it is. An activation
called after the model's last layer with weights is its output (a sigmoid that makes a
probability) and stays too: swapping it would change what the model predicts.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from harness.core.errors import ConfigError

SWAPS: dict[str, Callable[[], nn.Module]] = {
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "leaky_relu": lambda: nn.LeakyReLU(0.01),
}
SWAPPABLE = (nn.ReLU, nn.ReLU6, nn.Sigmoid, nn.Tanh, nn.ELU, nn.SELU, nn.Hardtanh, nn.GELU, nn.SiLU, nn.LeakyReLU)
WEIGHTED = (nn.Linear, nn.modules.conv._ConvNd, nn.Embedding, nn.RNNBase)


def validate_activation_swap(value: object) -> None:
    if value is not None and value not in SWAPS:
        raise ConfigError("activation_swap", value, f"null or one of {list(SWAPS)}")


def swap_activations(model: nn.Module, target: str | None, example: torch.Tensor) -> list[str]:
    """Replace every hidden activation module by SWAPS[target]; returns what was replaced
    ("hidden.1.act: ReLU -> GELU"). `example` is a batch of inputs: one forward in eval mode and
    without gradients tells hidden activations from output ones."""
    if target is None:
        return []
    replaced = []
    for name in _hidden_activations(model, example):
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        old, new = getattr(parent, child), SWAPS[target]()
        if type(old) is not type(new):
            setattr(parent, child, new)
            replaced.append(f"{name}: {type(old).__name__} -> {type(new).__name__}")
    return replaced


def _hidden_activations(model: nn.Module, example: torch.Tensor) -> list[str]:
    """Names of the activation modules called before the last call of a layer with weights."""
    calls: list[tuple[str, bool]] = []  # (module name, has weights) in call order
    hooks = [module.register_forward_hook(lambda m, i, o, name=name, weighted=isinstance(module, WEIGHTED):
                                          calls.append((name, weighted)))
             for name, module in model.named_modules() if isinstance(module, (*SWAPPABLE, *WEIGHTED))]
    training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(example)
    finally:
        model.train(training)
        for hook in hooks:
            hook.remove()
    last_weighted = max((i for i, (_, weighted) in enumerate(calls) if weighted), default=-1)
    names = [name for name, weighted in calls[:last_weighted] if not weighted]
    return list(dict.fromkeys(names))
