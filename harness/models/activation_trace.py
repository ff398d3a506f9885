"""One forward of a built model with hooks on its activation modules and its layers with weights:
which activations are hidden (called before the last layer with weights) and which make its
output (called after it), and the module replacement both kinds' keys make. `activation_swap`
changes the first kind, `output_activation` the second; the diagnosis reads what the second kind
can produce."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

ACTIVATIONS = (nn.ReLU, nn.ReLU6, nn.Sigmoid, nn.Tanh, nn.ELU, nn.SELU, nn.Hardtanh, nn.GELU, nn.SiLU,
               nn.LeakyReLU, nn.Softmax, nn.LogSoftmax, nn.Softplus, nn.Hardsigmoid, nn.LogSigmoid)
WEIGHTED = (nn.Linear, nn.modules.conv._ConvNd, nn.Embedding, nn.RNNBase)
# Leaf modules without weights that map a tensor to one of its shape yet are no activation.
NOT_ACTIVATIONS = (nn.modules.dropout._DropoutNd, nn.Identity, nn.modules.pooling._MaxPoolNd,
                   nn.modules.pooling._AvgPoolNd, nn.modules.pooling._AdaptiveAvgPoolNd,
                   nn.modules.pooling._AdaptiveMaxPoolNd, nn.Flatten, nn.Unflatten)


def own_activation(module: nn.Module) -> bool:
    """A user's activation written as a module (an `Exp`, a `Swish`): a leaf with no weights of
    its own that is none of the shape-keeping layers above; `acts_elementwise` decides on a call."""
    return (not isinstance(module, (*ACTIVATIONS, *WEIGHTED, *NOT_ACTIVATIONS)) and not any(True for _ in module.children())
            and not any(True for _ in module.parameters(recurse=False)))


def acts_elementwise(module: nn.Module, inputs: tuple, output: object) -> bool:
    """Whether a call of `module` was an activation's: a known one, or a user's leaf module that
    returned a tensor shaped like its one tensor input."""
    if isinstance(module, ACTIVATIONS):
        return True
    return (own_activation(module) and isinstance(output, torch.Tensor) and len(inputs) == 1
            and isinstance(inputs[0], torch.Tensor) and inputs[0].shape == output.shape and output.is_floating_point())


@dataclass
class ActivationTrace:
    """Activation module names in call order: `hidden` before the last call of a layer with weights,
    `output` after it (with the tensors they returned); `final` is the tensor the loss reads."""

    hidden: list[str] = field(default_factory=list)
    output: list[tuple[str, torch.Tensor]] = field(default_factory=list)
    final: torch.Tensor | None = None


def trace_activations(model: nn.Module, example: Any,
                      pick_output: Callable[[object], torch.Tensor] | None = None,
                      call: Callable[[nn.Module, Any], Any] | None = None) -> ActivationTrace:
    """One forward of `example` in eval mode without gradients (`call(model, example)`: a whole
    batch, for the user's objective). Only the activations called since the last layer with weights
    keep their outputs, so the trace holds a few tensors, not the whole forward."""
    trace, pending = ActivationTrace(), []

    def on_call(module: nn.Module, inputs: tuple, output: object, name: str) -> None:
        if isinstance(module, WEIGHTED):
            trace.hidden += [n for n, _ in pending if n not in trace.hidden]
            pending.clear()
        elif isinstance(output, torch.Tensor) and acts_elementwise(module, inputs, output):
            pending.append((name, output))

    hooks = [module.register_forward_hook(lambda m, i, o, name=name: on_call(m, i, o, name))
             for name, module in model.named_modules()
             if isinstance(module, (*ACTIVATIONS, *WEIGHTED)) or own_activation(module)]
    training = model.training
    try:
        model.eval()
        with torch.no_grad():
            out = call(model, example) if call is not None else model(example)
    finally:
        model.train(training)
        for hook in hooks:
            hook.remove()
    trace.output = pending
    trace.final = pick_output(out) if pick_output is not None else out if isinstance(out, torch.Tensor) else None
    return trace


def replace_module(model: nn.Module, name: str, new: nn.Module) -> list[str]:
    """Put `new` where the submodule `name` is; what changed ("a.b: ReLU -> GELU"), or nothing when it
    is of the same type already."""
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    old = getattr(parent, child)
    if type(old) is type(new) and repr(old) == repr(new):
        return []
    setattr(parent, child, new)
    return [f"{name}: {type(old).__name__} -> {type(new).__name__}"]
