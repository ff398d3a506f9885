"""Stack Overflow 50481178: a five-layer ReLU classifier of one binary label with a sigmoid output
under binary cross-entropy; the "fix" is a two-way softmax, the same model written another way."""
from __future__ import annotations

from sklearn.datasets import make_multilabel_classification

from .keras_like import Dense, KerasNet
from .standins import Splits, split

HIDDEN = [Dense(10, "relu"), Dense(20, "relu"), Dense(30, "relu"), Dense(40, "relu"), Dense(50, "relu")]


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((4,), [*HIDDEN, Dense(1, "sigmoid")], "binary_crossentropy")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((4,), [*HIDDEN, Dense(2, "softmax")], "categorical_crossentropy")


def build() -> Splits:
    """The program's data (1000 rows, 4 count features, one label), seeded; the test fifth validates."""
    x, y = make_multilabel_classification(n_samples=1000, n_features=4, n_classes=1, random_state=0)
    return split(x, y.ravel(), test_size=0.2, seed=0, classification=True)
