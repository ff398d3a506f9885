"""Stack Overflow 34673164: which candidate a county voted for, from 16 raw columns (populations in
the hundred thousands, incomes, shares), through two tanh layers of 64 (uniform init, dropout 0.5)
and a softmax over two outputs trained on mean squared error against the one-hot rows, SGD at lr
0.1 with Nesterov momentum 0.9; the fix puts batch normalisation before the first layer and a
sigmoid on the outputs, and trains binary cross-entropy."""
from __future__ import annotations

import numpy as np

from .keras_like import BatchNorm, Dense, Dropout, KerasNet
from .standins import Splits, counties, tensors


def layers(out: str) -> list:
    return [Dense(64, "tanh", "uniform"), Dropout(0.5), Dense(64, "tanh", "uniform"), Dropout(0.5),
            Dense(2, out, "uniform")]


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((16,), layers("softmax"), "mean_squared_error")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((16,), [BatchNorm(), *layers("sigmoid")], "binary_crossentropy", float_targets=True)


class FixedScored(KerasNet):
    """The fix's sigmoid outputs as the program's mean squared error reads them: the fix's weights
    under the buggy program's own loss, which a remedy run is scored by."""

    def __init__(self) -> None:
        super().__init__((16,), [BatchNorm(), *layers("sigmoid")], "mean_squared_error")


def build() -> Splits:
    """The seeded stand-in of `standins.counties` for dataset.csv as `pandas.read_csv` reads it
    (its first row taken as the header): 9 counties, 4 and 5 per candidate; the labels encoded and
    one-hot, as floats for both losses. The programs score their own training rows."""
    x, label = counties(seed=0)
    y = np.eye(2)[label]
    return tensors(x, y, classification=False), tensors(x, y, classification=False)
