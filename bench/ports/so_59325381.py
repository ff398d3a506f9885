"""Stack Overflow 59325381: an MNIST convnet whose training labels were divided by 255 (meant for
the pixels): sparse categorical cross-entropy casts them to 0, so every training label is class 0,
while the test labels stay 0-9 and the test pixels 0-255; the fix scales the test pixels instead."""
from __future__ import annotations

from .keras_like import Conv2D, Dense, KerasNet, MaxPool
from .standins import Splits, digits, tensors


class Net(KerasNet):
    def __init__(self) -> None:
        super().__init__((1, 28, 28), [Conv2D(64, 3, padding="same"), MaxPool(), Conv2D(32, 3, padding="same"),
                                       MaxPool(), Dense(128, "relu"), Dense(10, "softmax")], "categorical_crossentropy")


def build(labels_over_255: bool = False) -> Splits:
    """MNIST stands in as scikit-learn's digits upsampled to 28x28 (0-255 pixels)."""
    x_train, y_train, x_val, y_val = digits()
    if labels_over_255:  # x_train /= 255 and y_train /= 255; x_test is left raw
        return tensors(x_train / 255, (y_train / 255).astype(int), True), tensors(x_val, y_val, True)
    return tensors(x_train / 255, y_train, True), tensors(x_val / 255, y_val, True)
