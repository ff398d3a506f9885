"""TensorFlow-Program-Bugs StackOverflow/UT-15 (Stack Overflow 38447935): a linear fit y = x w on three
points whose loss `reduce_mean(square(y_ - y))` subtracts predictions of shape [3, 1] from targets of
shape [3]: broadcasting makes it the mean over all 9 (target, prediction) pairs, whose minimum predicts
the targets' mean for every row. The fix gives the targets shape [3, 1]."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .standins import Splits, tensors


class Net(nn.Module):
    """w of shape (2, 1), truncated-normal (stddev 0.1) as the program's weight_variable (float32
    here, float64 there); x already holds the program's column of ones."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(nn.init.trunc_normal_(torch.empty(2, 1), 0.0, 0.1, -0.2, 0.2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 2] -> [B, 1]
        return x @ self.w


def broadcast_mse(output: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The program's loss: targets [B] minus predictions [B, 1] broadcast to [B, B]. `prior`: the loss
    of the best constant prediction (the targets' variance under either loss), for the harness."""
    target = batch[1]
    return {"loss": (target - output).square().mean(), "prior": target.var(unbiased=False)}


def aligned_mse(output: torch.Tensor, batch: tuple[torch.Tensor, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The fix: tf.expand_dims(y_, axis=1), so each prediction meets its own target."""
    target = batch[1]
    return {"loss": (target.unsqueeze(1) - output).square().mean(), "prior": target.var(unbiased=False)}


def build() -> Splits:
    """The program's three points, which it also evaluates on."""
    x = np.array([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    y = np.array([1.0, 2.0, 3.0])
    return tensors(x, y, classification=False), tensors(x, y, classification=False)
