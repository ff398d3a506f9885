"""Stack Overflow 31880720: all-ones rows (True) against all-zeros rows (False), through a softmax
over one output unit, which is 1 whatever the input; the fix is a sigmoid."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, Dropout, KerasNet
from .standins import Splits, tensors


class Buggy(KerasNet):
    def __init__(self) -> None:
        # Dense(50, activation='relu') then Activation('relu'): a second ReLU changes nothing
        layers = [Dense(50, "relu"), Dropout(0.2), Dense(50, "relu"), Dropout(0.2), Dense(1, "softmax")]
        super().__init__((128,), layers, "binary_crossentropy")


class Fixed(KerasNet):
    def __init__(self) -> None:
        layers = [Dense(50, "relu"), Dropout(0.2), Dense(50, "relu"), Dropout(0.2), Dense(1, "sigmoid")]
        super().__init__((128,), layers, "binary_crossentropy")


def build() -> Splits:
    def rows(n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.array([[1] * 128] * n + [[0] * 128] * n), np.array([1] * n + [0] * n)

    return tensors(*rows(10 ** 4), classification=True), tensors(*rows(10 ** 2), classification=True)
