"""Stack Overflow 59278771: iris through a ReLU layer and a sigmoid output under categorical
cross-entropy, on the raw features; the fix min-max scales them and adds a ReLU layer of 8 before
a softmax output."""
from __future__ import annotations

from sklearn.datasets import load_iris
from sklearn.model_selection import KFold
from sklearn.preprocessing import MinMaxScaler

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((4,), [Dense(4, "relu", "normal"), Dense(3, "sigmoid", "normal")], "categorical_crossentropy")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((4,), [Dense(4, "relu", "normal"), Dense(8, "relu", "normal"), Dense(3, "softmax", "normal")],
                         "categorical_crossentropy")


def build(min_max: bool = False) -> Splits:
    """The fix's first fold of KFold(10, shuffle=True, random_state=7), for both programs (the
    buggy one fits all 150 rows and validates nothing)."""
    x, y = load_iris(return_X_y=True)
    if min_max:
        x = MinMaxScaler().fit_transform(x)
    train, val = next(KFold(n_splits=10, shuffle=True, random_state=7).split(x))
    return tensors(x[train], y[train], classification=True), tensors(x[val], y[val], classification=True)
