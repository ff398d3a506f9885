"""TensorFlow-Program-Bugs StackOverflow/IPS-15 (Stack Overflow 43636736): a linear regression of
y = 2x + 4 + noise on the raw x = 0, 1, ..., 99 by gradient descent at lr 0.5 on half the mean
squared error, far past what the inputs' scale allows: it diverges. The fix is lr 0.0005."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .standins import Splits, tensors


class Net(nn.Module):
    """Yhat = W X with W of shape (1, 2) starting at ones; X's rows are x and a row of ones."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(2, 1, bias=False)
        nn.init.ones_(self.linear.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def build(t: int = 100) -> Splits:
    """The program's data exactly (numpy seeded 20180130 as it seeds it): noise = 10 U[0, 1), x = 0..99,
    y = 2x + 4 + noise. It scores its own rows, and so does the port."""
    rng = np.random.RandomState(20180130)
    noise = 10 * rng.random_sample(size=t).astype(np.float32)
    x = np.stack([np.arange(t), np.ones(t)], axis=1).astype(np.float32)
    y = x @ np.array([2.0, 4.0], dtype=np.float32) + noise
    return tensors(x, y, classification=False), tensors(x, y, classification=False)
