"""Stack Overflow 44164749: MNIST through ReLU layers of 5000 and 600 (dropout 0.1) and a softmax
over 10 classes on categorical cross-entropy, SGD at lr 0.01 with Nesterov momentum 0.9, batches
of 2000; the "fix" puts a sigmoid on the 10 outputs and trains binary cross-entropy on the one-hot
rows (Keras then reports a per-output binary accuracy)."""
from __future__ import annotations

import numpy as np

from .keras_like import Dense, Dropout, KerasNet
from .standins import Splits, digits, tensors


def layers(out: str) -> list:
    return [Dense(5000, "relu"), Dropout(0.1), Dense(600, "relu"), Dropout(0.1), Dense(10, out)]


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((784,), layers("softmax"), "categorical_crossentropy")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((784,), layers("sigmoid"), "binary_crossentropy", float_targets=True)


def build(one_hot: bool = False) -> Splits:
    """MNIST stands in as scikit-learn's digits upsampled to 28x28, flattened, /255; the targets
    class ids (the softmax) or one-hot rows as floats (binary cross-entropy)."""
    x_train, y_train, x_val, y_val = digits()

    def targets(y: np.ndarray) -> np.ndarray:
        return np.eye(10)[y] if one_hot else y

    return (tensors(x_train.reshape(len(x_train), -1) / 255, targets(y_train), not one_hot),
            tensors(x_val.reshape(len(x_val), -1) / 255, targets(y_val), not one_hot))
