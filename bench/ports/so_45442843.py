"""Stack Overflow 45442843: a binary label from one raw number (15000 to 25000) through Dense 1
(sigmoid) and Dense 1 under a softmax, which is 1 whatever the input, trained on mean absolute
error; the fix scales the input, puts a sigmoid on the output and trains binary cross-entropy."""
from __future__ import annotations

import numpy as np
from sklearn import preprocessing

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors, threshold_column


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((1,), [Dense(1, "sigmoid"), Dense(1, "softmax", "normal")], "mean_absolute_error")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((1,), [Dense(1, "sigmoid"), Dense(1, "sigmoid", "normal")], "binary_crossentropy")


def build(scaled: bool = False, classification: bool = False) -> Splits:
    """The seeded stand-in of `standins.threshold_column` for dataset.csv as `pandas.read_csv` reads
    it (its first row taken as the header: 999 rows); the first 80% train, the rest validate, as in
    the program. The buggy program regresses the 0/1 labels (mean absolute error), the fixed one
    classifies them."""
    x, y = threshold_column(seed=0)
    if scaled:
        x = preprocessing.scale(x)
    cut = int(len(x) * 0.80)
    y = y.astype(np.int64) if classification else y.astype(np.float32)
    return tensors(x[:cut], y[:cut], classification), tensors(x[cut:], y[cut:], classification)
