"""Keras 2.2's layer defaults and loss semantics in plain torch, shared by the ports in this package.

A port lists its layers as the Keras program does (`Dense(12, "relu", init="uniform")`, ...) and
names the Keras loss it was compiled with; `KerasNet` builds the stack with Keras' initialisers
(glorot-uniform kernels and zero biases unless the program says otherwise) and turns the
program's output into what the harness's loss reads:

- softmax + categorical_crossentropy: the logits (the harness applies cross-entropy to them);
- any other output + categorical_crossentropy: Keras normalises the outputs to sum to 1 and
  clips them to [eps, 1 - eps] before the log, so `log(clip(p / sum(p)))` are the logits whose
  cross-entropy equals Keras' loss (a sigmoid output becomes log-sigmoid logits);
- binary_crossentropy on one output p: two-class logits `[log(1 - p), log(p)]`, clipped as
  Keras clips p, whose cross-entropy is Keras' binary cross-entropy, zero gradients included
  where the clip holds;
- mean_squared_error: the outputs as they are (the harness's regression loss is MSE);
- mean_absolute_error: the outputs as they are (the case trains them with `loss.function=l1`);
- binary_crossentropy against float targets (several outputs: multi-label, one-hot rows, per-pixel
  or soft targets in [0, 1]; `float_targets=True`): the logits `log(p) - log(1 - p)` of the
  clipped p, which is what Keras 2.2 (TensorFlow backend) feeds `sigmoid_cross_entropy_with_logits`,
  so the harness's `loss.function=bce` on them is Keras' binary cross-entropy exactly, zero
  gradients included where the clip holds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

EPSILON = 1e-7  # keras.backend.epsilon(): the clip of probabilities in Keras' cross-entropies
ACTIVATIONS = {"relu": nn.ReLU, "sigmoid": nn.Sigmoid, "tanh": nn.Tanh, "elu": nn.ELU, "linear": nn.Identity,
               "softmax": lambda: nn.Softmax(dim=1)}
LOSSES = ("categorical_crossentropy", "binary_crossentropy", "mean_squared_error", "mean_absolute_error")


@dataclass(frozen=True)
class Dense:
    units: int
    activation: str = "linear"
    init: str = "glorot_uniform"
    bias: float | str = 0.0  # a constant, or an initialiser's name


@dataclass(frozen=True)
class Conv2D:
    filters: int
    kernel: int
    activation: str = "linear"
    init: str = "glorot_uniform"
    bias: float = 0.0
    stride: int = 1
    padding: str = "valid"


@dataclass(frozen=True)
class MaxPool:
    size: int = 2


@dataclass(frozen=True)
class Dropout:
    rate: float


@dataclass(frozen=True)
class BatchNorm:
    """Keras' BatchNormalization() on features: momentum 0.99 (torch's 0.01), epsilon 1e-3."""


Layer = Dense | Conv2D | MaxPool | Dropout | BatchNorm


def initialise(weight: torch.Tensor, init: str, fan_in: int, fan_out: int) -> None:
    """Keras' kernel initialisers by name: `uniform` and `normal` are Keras' RandomUniform(-0.05,
    0.05) and RandomNormal(0, 0.05), which the older `init=` argument and `kernel_initializer`
    strings select; `unit_normal` is RandomNormal(stddev=1)."""
    with torch.no_grad():
        if init == "glorot_uniform":
            limit = math.sqrt(6.0 / (fan_in + fan_out))
            weight.uniform_(-limit, limit)
        elif init == "uniform":
            weight.uniform_(-0.05, 0.05)
        elif init in ("normal", "random_normal"):
            weight.normal_(0.0, 0.05)
        elif init == "unit_normal":
            weight.normal_(0.0, 1.0)
        elif init == "he_normal":
            std = math.sqrt(2.0 / fan_in)
            nn.init.trunc_normal_(weight, 0.0, std, -2 * std, 2 * std)
        else:
            raise ValueError(f"unknown Keras initialiser {init!r}")


def _dense(in_features: int, spec: Dense) -> nn.Linear:
    layer = nn.Linear(in_features, spec.units)
    initialise(layer.weight, spec.init, in_features, spec.units)
    if isinstance(spec.bias, str):
        initialise(layer.bias, spec.bias, in_features, spec.units)
    else:
        nn.init.constant_(layer.bias, spec.bias)
    return layer


def _conv(channels: int, spec: Conv2D) -> nn.Conv2d:
    padding = spec.kernel // 2 if spec.padding == "same" else 0
    layer = nn.Conv2d(channels, spec.filters, spec.kernel, stride=spec.stride, padding=padding)
    area = spec.kernel * spec.kernel
    initialise(layer.weight, spec.init, area * channels, area * spec.filters)
    nn.init.constant_(layer.bias, spec.bias)
    return layer


def build_layers(input_shape: tuple[int, ...], spec: list[Layer]) -> nn.Sequential:
    """The layers of a Keras Sequential model reading `input_shape` ((features,) or (C, H, W));
    a Dense after convolutions flattens first, as Keras' Flatten does."""
    layers: list[nn.Module] = []
    shape = input_shape
    for item in spec:
        if isinstance(item, Dense):
            if len(shape) > 1:
                layers.append(nn.Flatten())
                shape = (math.prod(shape),)
            layers += [_dense(shape[0], item), ACTIVATIONS[item.activation]()]
            shape = (item.units,)
        elif isinstance(item, Conv2D):
            layers += [_conv(shape[0], item), ACTIVATIONS[item.activation]()]
            size = (shape[1] + 2 * (item.kernel // 2 if item.padding == "same" else 0) - item.kernel) // item.stride + 1
            shape = (item.filters, size, size)
        elif isinstance(item, BatchNorm):
            layers.append(nn.BatchNorm1d(shape[0], eps=1e-3, momentum=0.01) if len(shape) == 1 else
                          nn.BatchNorm2d(shape[0], eps=1e-3, momentum=0.01))
        elif isinstance(item, MaxPool):
            layers.append(nn.MaxPool2d(item.size))
            shape = (shape[0], shape[1] // item.size, shape[2] // item.size)
        else:
            layers.append(nn.Dropout(item.rate))
    return nn.Sequential(*layers)


def binary_logits(p: torch.Tensor) -> torch.Tensor:
    """Two-class logits whose cross-entropy is Keras' binary_crossentropy on the probability p."""
    p = p.reshape(-1, 1).clamp(EPSILON, 1.0 - EPSILON)
    return torch.cat([torch.log1p(-p), torch.log(p)], dim=1)


def bce_logits(p: torch.Tensor) -> torch.Tensor:
    """Per-output logits whose binary cross-entropy with logits is Keras' binary_crossentropy on the
    probabilities p (any shape): Keras clips p to [eps, 1 - eps] and takes log(p / (1 - p))."""
    p = p.clamp(EPSILON, 1.0 - EPSILON)
    return torch.log(p) - torch.log1p(-p)


def categorical_logits(p: torch.Tensor) -> torch.Tensor:
    """Logits whose cross-entropy is Keras' categorical_crossentropy on the outputs p: normalised
    to sum to 1, then clipped (outputs that are all 0 give 0/0 = NaN, as in Keras)."""
    return (p / p.sum(dim=1, keepdim=True)).clamp(EPSILON, 1.0 - EPSILON).log()


class KerasNet(nn.Module):
    """A Keras Sequential model compiled with `loss`, its output fed to the harness's loss as
    Keras would feed it to that loss. `float_targets`: binary_crossentropy against float targets
    (several outputs, soft or per-pixel targets), read by `loss.function=bce`."""

    def __init__(self, input_shape: tuple[int, ...], spec: list[Layer], loss: str,
                 float_targets: bool = False) -> None:
        super().__init__()
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}")
        softmax_ce = loss == "categorical_crossentropy" and isinstance(spec[-1], Dense) and \
            spec[-1].activation == "softmax"
        if softmax_ce:  # the harness's cross-entropy takes logits: Keras' softmax is in it
            last = spec[-1]
            spec = [*spec[:-1], Dense(last.units, "linear", last.init, last.bias)]
        self.layers = build_layers(input_shape, spec)
        self.loss = "logits" if softmax_ce else "bce_logits" if float_targets and loss == "binary_crossentropy" else loss

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(x)
        if self.loss == "bce_logits":
            return bce_logits(out)
        if self.loss == "binary_crossentropy":
            return binary_logits(out)
        if self.loss == "categorical_crossentropy":
            return categorical_logits(out)
        return out
