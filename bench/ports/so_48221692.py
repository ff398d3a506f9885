"""Stack Overflow 48221692: linear regression through a sigmoid hidden layer and a sigmoid output,
which cannot leave (0, 1); the fix is a linear output."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, KerasNet
from .standins import Splits, split


class Buggy(KerasNet):
    out = "sigmoid"

    def __init__(self) -> None:
        super().__init__((1,), [Dense(5, "sigmoid"), Dense(1, self.out)], "mean_squared_error")


class Fixed(Buggy):
    out = "linear"


def build(n: int = 100) -> Splits:
    """Linear_Data.csv is not in the benchmark: n points of a noisy line, x in [0, 100), y = 0.5x +
    10 plus noise of sd 10 (the reported losses, 2312 buggy and 122 fixed, fit targets of that size)."""
    rng = np.random.default_rng(7)
    x = 100 * rng.random((n, 1))
    y = 0.5 * x[:, 0] + 10 + 10 * rng.standard_normal(n)
    return split(x, y, test_size=0.25, seed=7, classification=False)
