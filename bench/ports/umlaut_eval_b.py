"""umlaut's user-study program B (BerkeleyHCI/umlaut, user_eval/eval_b.py; Schoop, Huang and
Hartmann, "UMLAUT", CHI 2021): the study's CIFAR-10 convnet with no activation in any layer (linear
convs and dense layers), trained by Adam at learning_rate=-1e3 (a negative rate: it climbs the
loss), and validated on the first 100 training images. Its fixed twin is the repository's clean
CIFAR program (test_train_cifar.py, last at e9d9998): ReLUs, Adam's default rate, validation_split
0.2, as umlaut_example.py's comments name the fixes."""
from __future__ import annotations

import torch
from torch import nn

from .keras_like import build_layers
from .standins import Splits, colour_digits, tensors
from .umlaut_eval_a import convnet, validation_split


class NegativeLRAdam(torch.optim.Adam):
    """tf.keras' Adam(learning_rate=-lr). TensorFlow takes a negative rate and steps up the loss;
    torch's Adam (and the harness's optim.lr check) refuse one, so this Adam is given |lr| and steps
    along the negated gradient. Adam's update is odd in the gradient (the first moment changes sign,
    the second does not), so each step is exactly the one Adam takes at -|lr| on the true gradient."""

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.neg_()
        return super().step(closure)


class Buggy(nn.Module):
    activation = "linear"

    def __init__(self) -> None:
        super().__init__()
        self.layers = build_layers((3, 32, 32), convnet(self.activation, 0.2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)  # SparseCategoricalCrossentropy(from_logits=True): logits


class Fixed(Buggy):
    activation = "relu"


def build(validate_on_train: bool = False) -> Splits:
    """CIFAR-10 (tf.keras.datasets downloads it) stands in as scikit-learn's digits upsampled to
    32x32 in random colours (standins.colour_digits), / 255 as both programs scale. The buggy program
    trains on every image and validates on the first 100 of them (validation_data=(train_images[:100],
    ...)); the fix's validation_split=0.2 holds the last 360 out."""
    x, y = colour_digits()
    x = x / 255.0
    if validate_on_train:
        return tensors(x, y, classification=True), tensors(x[:100], y[:100], classification=True)
    return validation_split(x, y)
