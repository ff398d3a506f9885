"""Stack Overflow 51930566: iris through a ReLU layer and a sigmoid output under categorical
cross-entropy, on the raw features (the scaled ones are computed, then overwritten); the fix is a
softmax output on the scaled features."""
from __future__ import annotations

from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

from .keras_like import Dense, KerasNet
from .standins import Splits, split


class Buggy(KerasNet):
    out = "sigmoid"

    def __init__(self) -> None:
        super().__init__((4,), [Dense(4, "relu", "normal"), Dense(3, self.out, "normal")], "categorical_crossentropy")


class Fixed(Buggy):
    out = "softmax"


def build(scaled: bool = False) -> Splits:
    x, y = load_iris(return_X_y=True)
    if scaled:
        x = StandardScaler().fit_transform(x)
    return split(x, y, test_size=0.5, seed=2, classification=True)
