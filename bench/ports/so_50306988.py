"""Stack Overflow 50306988: two uniform clusters, two sigmoid units and a two-way softmax trained
for 5 epochs; the fix trains a sigmoid output for 50 epochs on twice the points."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((2,), [Dense(2, "sigmoid"), Dense(2, "softmax")], "categorical_crossentropy")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((2,), [Dense(2, "sigmoid"), Dense(1, "sigmoid")], "binary_crossentropy")


def clusters(per_class: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Class 0 uniform in [0.2, 0.4)^2, class 1 in [0.5, 0.7)^2, shuffled."""
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(0.2, 0.4, (per_class, 2)), rng.uniform(0.5, 0.7, (per_class, 2))])
    y = np.repeat([0, 1], per_class)
    order = rng.permutation(len(y))
    return x[order], y[order]


def build(per_class: int = 100) -> Splits:
    """The program validates nothing: the port validates on a fresh draw of the same clusters."""
    return tensors(*clusters(per_class, 0), classification=True), tensors(*clusters(100, 1), classification=True)
