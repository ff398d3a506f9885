"""Stack Overflow 39217567: the 256 8-bit vectors mapped to a shuffled copy of themselves (a lookup
table of random rows) through three sigmoid layers of 8 (normal init) on mean squared error, SGD
at lr 0.01 in batches of 50; the fixed program maps each vector to itself through ReLU, ReLU and a
sigmoid layer on binary cross-entropy, in batches of 1."""
from __future__ import annotations

import random

import numpy as np

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors

DIM = 8


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((DIM,), [Dense(DIM, "sigmoid", "normal")] * 3, "mean_squared_error")


class Fixed(KerasNet):
    def __init__(self) -> None:
        layers = [Dense(DIM, "relu", "normal"), Dense(DIM, "relu", "normal"), Dense(DIM, "sigmoid", "normal")]
        super().__init__((DIM,), layers, "binary_crossentropy", float_targets=True)


def build(shuffled: bool = True) -> Splits:
    """Every 8-bit vector; the targets a shuffled copy of the rows (random.shuffle, seeded: the
    buggy program does not seed it) or the rows themselves (the fixed program comments the shuffle
    out). The programs score their own training rows."""
    x = [[float(bit) for bit in format(i, f"0{DIM}b")] for i in range(2 ** DIM)]
    y = x[:]
    if shuffled:
        random.Random(7).shuffle(y)
    x, y = np.array(x), np.array(y)
    return tensors(x, y, classification=False), tensors(x, y, classification=False)
