"""User models with a planted defect, for the doctor's tests (`model._target_=tests.doctor_models.X`)."""
from __future__ import annotations

import torch
from torch import nn


class UnusedParamNet(nn.Module):
    """A small MLP with one parameter that forward never touches: the doctor must name `unused`."""

    def __init__(self, in_features: int, out_features: int, width: int = 32) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_features, width), nn.ReLU(), nn.Linear(width, out_features))
        self.unused = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class _HalfGradTanh(torch.autograd.Function):
    """tanh whose backward returns half the true gradient: the bug a hand-written backward makes."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return 0.5 * grad * (1 - y * y)


class WrongBackwardNet(nn.Module):
    """Two layers joined by `_HalfGradTanh`: only `first`'s gradient is wrong, `second`'s is right."""

    def __init__(self, in_features: int, out_features: int, width: int = 16) -> None:
        super().__init__()
        self.first = nn.Linear(in_features, width)
        self.second = nn.Linear(width, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(_HalfGradTanh.apply(self.first(x)))
