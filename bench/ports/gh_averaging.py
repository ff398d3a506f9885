"""GitHub vincenty2022/Averaging_Neural_Networks: learn the average of two numbers in [0, 1] with a
linear Dense(2) -> Dense(1); the fix puts a Dense(2, relu) between them."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((2,), [Dense(2), Dense(1)], "mean_squared_error")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((2,), [Dense(2), Dense(2, "relu"), Dense(1)], "mean_squared_error")


def pairs(count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer pairs in [0, 100] and their average, divided by 100 as the program preprocesses."""
    n = np.random.default_rng(seed).integers(0, 101, (count, 2))
    return n / 100, n.mean(axis=1) / 100


def build(n_train: int = 10000) -> Splits:
    """The program's generator (seeded); it validates nothing, the port on a fresh draw of 1000."""
    return tensors(*pairs(n_train, 0), classification=False), tensors(*pairs(1000, 1), classification=False)
