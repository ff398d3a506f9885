"""Stack Overflow 47352366: an MNIST convnet whose 10 outputs are ReLUs under categorical
cross-entropy (outputs all 0 give 0/0); the fix is a softmax output."""
from __future__ import annotations

from .keras_like import Conv2D, Dense, Dropout, KerasNet, MaxPool
from .standins import Splits, digits, tensors


class Buggy(KerasNet):
    out = "relu"

    def __init__(self) -> None:
        super().__init__((1, 28, 28), [Conv2D(32, 5, "relu", bias=0.1, padding="same"), MaxPool(),
                                       Conv2D(64, 5, "relu", bias=0.1, padding="same"), MaxPool(),
                                       Dense(1024, "relu", bias=0.1), Dropout(0.5), Dense(10, self.out)],
                         "categorical_crossentropy")


class Fixed(Buggy):
    out = "softmax"


def build() -> Splits:
    """MNIST (which input_data downloads) stands in as scikit-learn's digits upsampled to 28x28,
    scaled to [0, 1] as input_data scales MNIST."""
    x_train, y_train, x_val, y_val = digits()
    return tensors(x_train / 255, y_train, classification=True), tensors(x_val / 255, y_val, classification=True)
