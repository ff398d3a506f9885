"""User models with a planted training defect, for the remedies' tests
(`model._target_=tests.remedy_models.X`): plain torch, no harness keys, so only remedies that work
on any nn.Module can repair them."""
from __future__ import annotations

import torch
from torch import nn


def _stack(in_features: int, width: int, depth: int, activation: type[nn.Module]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(depth):
        layers += [nn.Linear(in_features if i == 0 else width, width), activation()]
    return nn.Sequential(*layers)


class DeadStartNet(nn.Module):
    """A ReLU MLP whose author drew its hidden weights from U(-0.05, 0.05) and set every hidden bias
    to -1: every hidden unit is below zero for every input from the first step, so nothing trains."""

    def __init__(self, in_features: int, out_features: int, width: int = 64, depth: int = 3) -> None:
        super().__init__()
        self.body, self.head = _stack(in_features, width, depth, nn.ReLU), nn.Linear(width, out_features)
        with torch.no_grad():
            for layer in self.body:
                if isinstance(layer, nn.Linear):
                    layer.weight.uniform_(-0.05, 0.05)
                    layer.bias.fill_(-1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class SigmoidStack(nn.Module):
    """A deep sigmoid MLP written by hand: each layer passes on at most a quarter of the gradient,
    so the first layers barely train."""

    def __init__(self, in_features: int, out_features: int, width: int = 64, depth: int = 10) -> None:
        super().__init__()
        self.hidden, self.head = _stack(in_features, width, depth, nn.Sigmoid), nn.Linear(width, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.hidden(x))


class SigmoidHeadRegressor(nn.Module):
    """A regression MLP whose author ended it with a sigmoid, as for a probability: its predictions
    stay in (0, 1) while the targets spread either side of 0."""

    def __init__(self, in_features: int, out_features: int, width: int = 64) -> None:
        super().__init__()
        self.body = _stack(in_features, width, 2, nn.ReLU)
        self.head, self.squash = nn.Linear(width, out_features), nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.squash(self.head(self.body(x)))
