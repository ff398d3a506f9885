"""Stack Overflow 55328966: MNIST rows of raw 0-255 pixels through a linear layer, a ReLU layer and
a sigmoid output under categorical cross-entropy, by plain gradient descent at lr 1e-4; the fix
divides the pixels by 255 and uses a softmax output."""
from __future__ import annotations

from .keras_like import Dense, KerasNet
from .standins import Splits, digits, tensors


class Buggy(KerasNet):
    out = "sigmoid"

    def __init__(self) -> None:
        super().__init__((784,), [Dense(784), Dense(50, "relu"), Dense(10, self.out)], "categorical_crossentropy")


class Fixed(Buggy):
    out = "softmax"


def build(divide: float = 1.0) -> Splits:
    """mnist_train.csv's 5000 rows stand in as scikit-learn's digits upsampled to 28x28 (784 raw
    0-255 pixels a row), 1297 to train and 500 to validate."""
    x_train, y_train, x_val, y_val = digits()
    return (tensors(x_train.reshape(len(x_train), -1) / divide, y_train, classification=True),
            tensors(x_val.reshape(len(x_val), -1) / divide, y_val, classification=True))
