"""GitHub alexander-travov/gol_nn, gol.py: Conway's Game of Life on 3x3 toroidal fields, the next
state of each cell from the wrap-padded field through a 3x3 conv of 10 (ReLU) and 1x1 convs of 20
(ReLU) and 1 (sigmoid), binary cross-entropy per cell with Adam at Keras' default lr 1e-3, batch
64, 2 epochs; the fixing commit trains mean squared error with Adam at lr 0.01."""
from __future__ import annotations

import numpy as np

from .keras_like import Conv2D, KerasNet
from .standins import Splits, tensors

LAYERS = [Conv2D(10, 3, "relu"), Conv2D(20, 1, "relu", padding="same"), Conv2D(1, 1, "sigmoid", padding="same")]


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((1, 5, 5), LAYERS, "binary_crossentropy", float_targets=True)


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((1, 5, 5), LAYERS, "mean_squared_error")


def generate(n: int, rng: np.random.Generator, size: int = 3, alive: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """The program's generate_dataset and pad_field, channels first: fields [n, 1, 3, 3] whose cells
    live with probability 0.5, their next states, the inputs wrap-padded to [n, 1, 5, 5]."""
    field = (rng.random((n, 1, size, size)) < alive).astype(np.int32)
    neighbours = sum(np.roll(np.roll(field, dx, 3), dy, 2) for dx in (-1, 0, 1) for dy in (-1, 0, 1) if dx or dy)
    nxt = np.logical_or(neighbours == 3, np.logical_and(field, neighbours == 2)).astype(np.float32)
    return np.pad(field, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="wrap").astype(np.float32), nxt


def build() -> Splits:
    """The program's 8000 training and 2000 validation fields (seeded: it seeds nothing)."""
    rng = np.random.default_rng(5)
    return tensors(*generate(8000, rng), classification=False), tensors(*generate(2000, rng), classification=False)
