"""umlaut's user-study program A (BerkeleyHCI/umlaut, user_eval/eval_a.py; Schoop, Huang and
Hartmann, "UMLAUT", CHI 2021): a CIFAR-10 convnet trained on the raw 0-255 pixels, with Dropout(0.8)
after each block, whose Dense(10) logits go to `sparse_categorical_crossentropy` without
`from_logits=True`, so the loss reads them as probabilities. Its fixed twin is the repository's clean
CIFAR program (test_train_cifar.py, last at e9d9998): pixels / 255, Dropout(0.2), the loss on
logits, as umlaut_example.py's comments name the fixes."""
from __future__ import annotations

import torch
from torch import nn

from .keras_like import EPSILON, Conv2D, Dense, Dropout, Layer, MaxPool, build_layers
from .standins import Splits, colour_digits, tensors

VALIDATION_SPLIT = 0.2


def convnet(activation: str, dropout: float) -> list[Layer]:
    """The study's convnet: two 3x3 convs of 64, a 2x2 pool, dropout, two 3x3 convs of 128, a pool,
    dropout, Dense 128, 128, dropout, Dense 10 (no activation); tf.keras' glorot-uniform kernels,
    zero biases, 'valid' padding."""
    return [Conv2D(64, 3, activation), Conv2D(64, 3, activation), MaxPool(), Dropout(dropout),
            Conv2D(128, 3, activation), Conv2D(128, 3, activation), MaxPool(), Dropout(dropout),
            Dense(128, activation), Dense(128, activation), Dropout(dropout), Dense(10)]


def sparse_ce_input(z: torch.Tensor) -> torch.Tensor:
    """What tf.keras' sparse_categorical_crossentropy(from_logits=False) feeds its softmax
    cross-entropy when the output is no softmax: the outputs clipped to [eps, 1 - eps], then their log
    (TF 2.x's backend does not normalise them first). Their cross-entropy is the program's loss,
    zero gradients where the clip holds included."""
    return z.clamp(EPSILON, 1.0 - EPSILON).log()


class Buggy(nn.Module):
    dropout = 0.8

    def __init__(self) -> None:
        super().__init__()
        self.layers = build_layers((3, 32, 32), convnet("relu", self.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return sparse_ce_input(self.layers(x))


class Fixed(Buggy):
    """test_train_cifar.py: Dropout(0.2), SparseCategoricalCrossentropy(from_logits=True): the
    logits as they are."""
    dropout = 0.2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def validation_split(x, y, fraction: float = VALIDATION_SPLIT) -> Splits:
    """Keras' fit(validation_split=...): the last `fraction` of the rows validate, before any shuffle."""
    cut = int(len(x) * (1.0 - fraction))
    return tensors(x[:cut], y[:cut], classification=True), tensors(x[cut:], y[cut:], classification=True)


def build(scaled: bool = False) -> Splits:
    """CIFAR-10 (tf.keras.datasets downloads it) stands in as scikit-learn's digits upsampled to
    32x32 in random colours, 0-255 (standins.colour_digits); `scaled`: / 255 as the fix does. Keras'
    validation_split=0.2: the last 360 of the 1797 images validate."""
    x, y = colour_digits()
    return validation_split(x / 255.0 if scaled else x, y)
