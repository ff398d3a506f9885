"""Stack Overflow 33969059: linear regression on inputs in [0, 10000) through tanh layers and a
softmax over one output unit, which is 1 whatever the input; the fix is a linear output (and
weights scaled by their largest)."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, Dropout, KerasNet
from .standins import Splits, tensors

WEIGHTS, OFFSET = [2.0, 1.0, 0.5], 2.2


class Buggy(KerasNet):
    out = "softmax"

    def __init__(self) -> None:
        super().__init__((3,), [Dense(3, "tanh", "uniform"), Dropout(0.5), Dense(2, "tanh", "uniform"), Dropout(0.5),
                                Dense(1, self.out, "uniform")], "mean_squared_error")


class Fixed(Buggy):
    out = "linear"


def build(scaled: bool = False, n_train: int = 100000, n_val: int = 10000) -> Splits:
    rng = np.random.default_rng(0)
    weights, offset = np.array(WEIGHTS), OFFSET
    if scaled:  # the fix's branch: every coefficient over the largest
        top = max(abs(w) for w in [*WEIGHTS, OFFSET])
        weights, offset = weights / top, offset / top

    def draw(count: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
        x = 10000 * rng.random((count, 3))
        return x, x @ weights + offset + noise * (rng.random(count) - 1.5)

    return tensors(*draw(n_train, 0.0), classification=False), tensors(*draw(n_val, 0.4), classification=False)
