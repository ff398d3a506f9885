"""TensorFlow-Program-Bugs StackOverflow/IPS-5 (Stack Overflow 39939881): a one-variable linear
regression on 8 points with x in [-8, 8], fitted by gradient descent at lr 0.1 on the mean squared
error, whose curvature (2 mean x^2) makes that step diverge; the fix is Adam at lr 0.1."""
from __future__ import annotations

import random

import numpy as np
import torch
from torch import nn

from .standins import Splits, tensors


class Net(nn.Module):
    """y = x W + B, W and B zeros."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def build(n_val: int = 100) -> Splits:
    """The program's data exactly (Python's random, seeded 20180130 as it seeds it): a line with w and
    b drawn from U(-8, 8), 8 points x in U(-8, 8), y = w x + b + U(-1, 1). It validates nothing: the
    next draws of the same stream (another 100 points of the same line) validate."""
    rng = random.Random(20180130)
    w, b = rng.uniform(-8, 8), rng.uniform(-8, 8)

    def points(n: int) -> tuple[np.ndarray, np.ndarray]:
        x = [rng.uniform(-8, 8) for _ in range(n)]
        return np.array(x).reshape(-1, 1), np.array([w * v + b + rng.uniform(-1, 1) for v in x])

    return tensors(*points(8), classification=False), tensors(*points(n_val), classification=False)
