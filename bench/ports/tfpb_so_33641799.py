"""TensorFlow-Program-Bugs StackOverflow/IPS-14 (Stack Overflow 33641799): TensorFlow's beginner MNIST
softmax regression trained on `-tf.reduce_sum(y_ * tf.log(y))` (summed over a batch of 205) by
gradient descent at lr 0.01, NaN once a probability underflows to 0; the fix is lr 0.005."""
from __future__ import annotations

import torch

from .standins import Splits
from .tf_mnist import SoftmaxRegression, mnist


class Net(SoftmaxRegression):
    """784 -> 10 softmax, W and b zeros; the output is log(y) as the program computes it, whose
    cross-entropy under the harness is the program's per-sample loss (log_softmax(log p) = log p)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(self.probabilities(x))


def build() -> Splits:
    """MNIST (input_data downloads it) stands in as scikit-learn's digits upsampled to 28x28 and scaled
    to [0, 1] as input_data scales MNIST."""
    return mnist()
