"""defects4ml bug 038 (NikhilM98/learning-deeplearning eb24906, super_basic_1.py): ages 13-100, scaled to
[0, 1], classified young/old (5% of the rows flipped) by Dense 16 and 32 (ReLU) and a 2-way softmax
under Adam at lr 100; the fix is lr 1e-4 (and the flipped rows first, so that the validation split
it adds holds none)."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors


class Net(KerasNet):
    def __init__(self) -> None:
        super().__init__((1,), [Dense(16, "relu"), Dense(32, "relu"), Dense(2, "softmax")], "categorical_crossentropy")


def ages(rng: np.random.Generator, flipped_first: bool) -> tuple[np.ndarray, np.ndarray]:
    """The program's loops: 1000 (young, 0), (old, 1) pairs and 50 flipped pairs, in its order."""
    def pairs(n: int, young_label: int) -> tuple[list[int], list[int]]:
        x, y = [], []
        for _ in range(n):
            x += [int(rng.integers(13, 65)), int(rng.integers(65, 101))]
            y += [young_label, 1 - young_label]
        return x, y
    clean, flipped = pairs(1000, 0), pairs(50, 1)
    first, second = (flipped, clean) if flipped_first else (clean, flipped)
    return np.array(first[0] + second[0], dtype=np.float64), np.array(first[1] + second[1])


def build(fixed: bool = False) -> Splits:
    """Seeded draws of the program's generator (it seeds nothing), MinMaxScaler on its own samples.
    The buggy program validates nothing: a fresh draw validates it. The fix validates on Keras'
    validation_split=0.1, the last 210 rows before shuffling (clean pairs)."""
    rng = np.random.default_rng(38)
    x, y = ages(rng, flipped_first=fixed)
    low, high = x.min(), x.max()
    scaled = ((x - low) / (high - low)).reshape(-1, 1)
    if fixed:
        cut = int(len(x) * 0.9)
        return tensors(scaled[:cut], y[:cut], classification=True), tensors(scaled[cut:], y[cut:], classification=True)
    x_val, y_val = ages(rng, flipped_first=False)
    return (tensors(scaled, y, classification=True),
            tensors(((x_val - low) / (high - low)).reshape(-1, 1), y_val, classification=True))
