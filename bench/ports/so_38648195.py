"""Stack Overflow 38648195: multi-label data (3 labels, any number of them on) through two ReLU
layers of 20 with dropout 0.5 and a softmax over the three outputs, trained on mean squared error;
the fix puts a sigmoid on the outputs and trains binary cross-entropy."""
from __future__ import annotations

from sklearn.datasets import make_multilabel_classification

from .keras_like import Dense, Dropout, KerasNet
from .standins import Splits, split


def layers(out: str) -> list:
    return [Dense(20, "relu"), Dropout(0.5), Dense(20, "relu"), Dropout(0.5), Dense(3, out)]


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((20,), layers("softmax"), "mean_squared_error")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((20,), layers("sigmoid"), "binary_crossentropy", float_targets=True)


class FixedScored(KerasNet):
    """The fix's sigmoid outputs as the program's mean squared error reads them: the fix's weights
    under the buggy program's own loss, which a remedy run is scored by."""

    def __init__(self) -> None:
        super().__init__((20,), layers("sigmoid"), "mean_squared_error")


def build() -> Splits:
    """The program's make_multilabel_classification(60000, 20 features, 3 classes) and its 0.2
    test split, seeded (the program seeds neither)."""
    x, y = make_multilabel_classification(n_samples=60000, n_features=20, n_classes=3, random_state=0)
    return split(x, y.astype(float), test_size=0.20, seed=0, classification=False)
