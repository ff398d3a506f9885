"""TensorFlow-Program-Bugs StackOverflow/IPS-17 (Stack Overflow 46577203): a quadratic A x^2 + B x + C
fitted to four points of y = x^2 (x = 0..3) by gradient descent at lr 0.01 on the *sum* of squared
errors, whose curvature (x^4 up to 81) makes that step diverge; the fix is lr 0.001."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .standins import Splits, tensors


class Net(nn.Module):
    """A, B and C, each starting at 0."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = (nn.Parameter(torch.zeros(1)) for _ in range(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 1] -> [B, 1]
        return self.a * x ** 2 + self.b * x + self.c


def build() -> Splits:
    """The program's four points, which it also evaluates on."""
    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    return tensors(x, x[:, 0] ** 2, classification=False), tensors(x, x[:, 0] ** 2, classification=False)
