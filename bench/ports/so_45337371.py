"""Stack Overflow 45337371 (updatepy.py): 5 uniform numbers per sample, each through the same Dense
60 and Dense 50 (ReLU) and Dense 1 under a softmax over that one unit, which is 1 whatever the
input, trained on binary cross-entropy against uniform soft targets in [0, 1]; the fix is a
sigmoid output."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors

FEATURES = 5


class Buggy(nn.Module):
    """Keras' Dense on a (5, 1) input acts on the last axis: the same layers for each of the 5
    numbers, and the softmax normalises over the last axis, of size 1."""
    out = "softmax"

    def __init__(self) -> None:
        super().__init__()
        self.net = KerasNet((1,), [Dense(60, "relu"), Dense(50, "relu"), Dense(1, self.out)], "binary_crossentropy",
                            float_targets=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, 5, 1] -> [B, 5, 1]
        return self.net(x.reshape(-1, 1)).reshape(x.shape)


class Fixed(Buggy):
    out = "sigmoid"


def build(n: int = 1000, n_val: int = 200) -> Splits:
    """The program's np.random.uniform inputs and targets of shape (1000, 5, 1), seeded; it
    validates nothing, so a fresh draw of 200 validates."""
    rng = np.random.default_rng(11)
    x, y = rng.uniform(size=(n + n_val, FEATURES, 1)), rng.uniform(size=(n + n_val, FEATURES, 1))
    return tensors(x[:n], y[:n], classification=False), tensors(x[n:], y[n:], classification=False)
