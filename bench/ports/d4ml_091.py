"""defects4ml bug 091 (Stack Overflow 56103207): a small convnet on 28x28 images of 5 classes, stored
sorted by class, fitted with Keras' validation_split=0.2, which takes the last 20% of the rows before
any shuffle: every validation image is of the one class the training rows never hold. The fix
shuffles the rows first."""
from __future__ import annotations

import numpy as np

from .keras_like import Conv2D, Dense, KerasNet, MaxPool
from .standins import Splits, digits, tensors


class Net(KerasNet):
    def __init__(self) -> None:
        super().__init__((1, 28, 28), [Conv2D(32, 5, "relu"), MaxPool(), Conv2D(16, 3, "relu"), MaxPool(),
                                       Dense(128, "relu"), Dense(64, "relu"), Dense(5, "softmax")],
                         "categorical_crossentropy")


def build(shuffled: bool = False) -> Splits:
    """Stand-in for x.npy (zipped in the collection; y.npy holds 60000 one-hot rows of 5 classes,
    12000 each, sorted by class): scikit-learn's digits 0-4 upsampled to 28x28 and scaled to [0, 1],
    the same count of each class (177), sorted by class as y.npy is. The last 20% (Keras'
    validation_split) validates; the fix permutes the rows first (np.random.permutation, seeded)."""
    x_train, y_train, x_val, y_val = digits()
    x, y = np.concatenate([x_train, x_val]) / 255.0, np.concatenate([y_train, y_val])
    per_class = min(int((y == k).sum()) for k in range(5))
    keep = np.concatenate([np.flatnonzero(y == k)[:per_class] for k in range(5)])
    x, y = x[keep], y[keep]
    if shuffled:
        order = np.random.default_rng(91).permutation(len(x))
        x, y = x[order], y[order]
    cut = int(len(x) * (1 - 0.2))
    return tensors(x[:cut], y[:cut], classification=True), tensors(x[cut:], y[cut:], classification=True)
