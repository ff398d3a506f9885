"""TensorFlow-Program-Bugs StackOverflow/IPS-7 (Stack Overflow 35078027): a one-hidden-layer MNIST MLP
(784-512 sigmoid, no biases, N(0, 1) weights) whose 10 outputs are linear, under a hand-written binary
cross-entropy `sum(-y log(y_) - (1 - y) log(1 - y_))`: the log of outputs outside (0, 1) is NaN. The
fix puts a sigmoid on the outputs, clips y_ and 1 - y_ at 1e-10 before the log, and raises the
gradient-descent LR from 0.05 to 0.5."""
from __future__ import annotations

import torch
from torch import nn

from .standins import Splits, digits, tensors


class Buggy(nn.Module):
    """The harness's bce (binary cross-entropy with logits, averaged over every output) reads the
    logits log(y_) - log(1 - y_), whose sigmoid is y_: the program's loss per output, NaN where the
    program's is."""
    sigmoid_output = False

    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = nn.Linear(784, 512, bias=False), nn.Linear(512, 10, bias=False)
        nn.init.normal_(self.hidden.weight, 0.0, 1.0)
        nn.init.normal_(self.out.weight, 0.0, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.out(torch.sigmoid(self.hidden(x.flatten(1))))
        if self.sigmoid_output:  # the fix: tf.nn.sigmoid, then tf.clip_by_value(., 1e-10, 1.0) on y_ and 1 - y_
            y = torch.sigmoid(y)
            return torch.log(y.clamp(1e-10, 1.0)) - torch.log((1 - y).clamp(1e-10, 1.0))
        return torch.log(y) - torch.log(1 - y)


class Fixed(Buggy):
    sigmoid_output = True


def build() -> Splits:
    """MNIST (input_data downloads it) stands in as scikit-learn's digits upsampled to 28x28 and scaled
    to [0, 1]; one-hot float targets, as the program feeds them to its per-output loss."""
    x_train, y_train, x_val, y_val = digits()
    eye = torch.eye(10).numpy()
    return (tensors(x_train / 255, eye[y_train], classification=False),
            tensors(x_val / 255, eye[y_val], classification=False))
