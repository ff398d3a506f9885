"""Stack Overflow 48385830: MNIST through Dense 30 and Dense 10 with no activation at all, trained
on mean squared error against one-hot rows by SGD at lr 3.0, weights and biases drawn with sd 1;
the fix puts a sigmoid and a softmax on the layers and trains cross-entropy."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, KerasNet
from .standins import Splits, digits, tensors


class Buggy(KerasNet):
    hidden, out, keras_loss = "linear", "linear", "mean_squared_error"

    def __init__(self) -> None:
        super().__init__((784,), [Dense(30, self.hidden, "unit_normal", "unit_normal"),
                                  Dense(10, self.out, "unit_normal", "unit_normal")], self.keras_loss)


class Fixed(Buggy):
    hidden, out, keras_loss = "sigmoid", "softmax", "categorical_crossentropy"


def build(one_hot: bool = False) -> Splits:
    """MNIST stands in as scikit-learn's digits upsampled to 28x28, pixels divided by 255; one-hot
    targets for the mean squared error."""
    x_train, y_train, x_val, y_val = digits()

    def targets(y: np.ndarray) -> np.ndarray:
        return np.eye(10)[y] if one_hot else y

    return (tensors(x_train.reshape(len(x_train), -1) / 255, targets(y_train), not one_hot),
            tensors(x_val.reshape(len(x_val), -1) / 255, targets(y_val), not one_hot))
