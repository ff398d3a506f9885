"""Stack Overflow 34311586: XOR rows through sigmoid layers and a softmax over one output unit,
which is 1 whatever the input, at SGD lr 0.001; the fix is a sigmoid output, lr 0.1 and batches of 4."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors

X = np.array([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]])
Y = np.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0])


class Buggy(KerasNet):
    out = "softmax"

    def __init__(self) -> None:
        layers = [Dense(2, "sigmoid", "uniform"), Dense(3, "sigmoid", "uniform"), Dense(1, self.out, "uniform")]
        super().__init__((2,), layers, "mean_squared_error")


class Fixed(Buggy):
    out = "sigmoid"


def build() -> Splits:
    """The program scores its own six training rows."""
    return tensors(X, Y, classification=False), tensors(X, Y, classification=False)
