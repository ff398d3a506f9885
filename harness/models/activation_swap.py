"""`activation_swap`: replace the activation modules of a built model, any model (a user's too),
by another activation. `diagnose.remedy=auto` uses it against dead ReLUs and saturating sigmoid or
tanh stacks without knowing the model's own keys.

Only modules can be swapped (the known activations, and a user's own activation module: a leaf
without weights that keeps its input's shape, such as an `Exp`): a `torch.relu` call inside a
forward stays what it is. An activation
called after the model's last layer with weights is its output (a sigmoid that makes a
probability) and stays too: swapping it would change what the model predicts.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import nn

from harness.core.errors import ConfigError
from harness.models.activation_trace import own_activation, replace_module, trace_activations

SWAPS: dict[str, Callable[[], nn.Module]] = {
    "gelu": nn.GELU,
    "silu": nn.SiLU,
    "leaky_relu": lambda: nn.LeakyReLU(0.01),
}
SWAPPABLE = (nn.ReLU, nn.ReLU6, nn.Sigmoid, nn.Tanh, nn.ELU, nn.SELU, nn.Hardtanh, nn.GELU, nn.SiLU, nn.LeakyReLU)


def validate_activation_swap(value: object) -> None:
    if value is not None and value not in SWAPS:
        raise ConfigError("activation_swap", value, f"null or one of {list(SWAPS)}")


def swap_activations(model: nn.Module, target: str | None, example: Any,
                     call: Callable[[nn.Module, Any], Any] | None = None) -> list[str]:
    """Replace every hidden activation module by SWAPS[target]; returns what was replaced
    ("hidden.1.act: ReLU -> GELU"). `example` is a batch of inputs: one traced forward tells hidden
    activations from output ones."""
    if target is None:
        return []
    replaced = []
    for name in trace_activations(model, example, call=call).hidden:
        module = model.get_submodule(name)
        if isinstance(module, SWAPPABLE) or own_activation(module):
            replaced += replace_module(model, name, SWAPS[target]())
    return replaced

