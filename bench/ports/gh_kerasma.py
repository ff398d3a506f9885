"""GitHub eangelou/kerasma: the Pima diabetes classifier (Dense 12-8-1) on raw columns; the fix
deepens it to 12-24-120-36-12-1."""
from __future__ import annotations

from .keras_like import Dense, KerasNet
from .standins import Splits, split, tabular

# pregnancies, glucose, blood pressure, skin thickness, insulin, BMI, pedigree, age: typical sizes
PIMA_SCALES = [3.8, 120.0, 69.0, 20.0, 80.0, 32.0, 0.47, 33.0]


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((8,), [Dense(12, "relu"), Dense(8, "relu"), Dense(1, "sigmoid")], "binary_crossentropy")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((8,), [Dense(12, "relu"), Dense(24, "relu"), Dense(120, "relu"), Dense(36, "relu"),
                                Dense(12, "relu"), Dense(1, "sigmoid")], "binary_crossentropy")


def build() -> Splits:
    """pima-indians-diabetes.data stands in as 768 rows of its 8 raw columns at their typical sizes,
    35% positive; the program scores its training rows, the port holds out a fifth."""
    x, y = tabular(768, PIMA_SCALES, seed=7, positive_share=0.35)
    return split(x, y, test_size=0.2, seed=7, classification=True)
