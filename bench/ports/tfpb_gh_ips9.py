"""TensorFlow-Program-Bugs Github/IPS-9 (aymericdamien/TensorFlow-Examples, logistic_regression.py): a
softmax regression on MNIST trained on `-tf.reduce_sum(y * tf.log(activation))`, NaN once a
probability underflows to 0; the fix averages over the batch and adds 1e-8 inside the log."""
from __future__ import annotations

import torch

from .standins import Splits
from .tf_mnist import SoftmaxRegression, mnist


class Buggy(SoftmaxRegression):
    """784 -> 10 softmax, W and b zeros. The output is log(activation) as the program computes it (the
    fix: log(activation + 1e-8)); the harness's cross-entropy of it is the program's per-sample loss,
    since log_softmax(log p) = log p when p sums to 1 (and with the fix's 1e-8 it differs by the
    constant log(1 + 1e-7), whose gradient is 0)."""
    offset = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(self.probabilities(x) + self.offset)


class Fixed(Buggy):
    offset = 1e-8


def build() -> Splits:
    """MNIST (input_data downloads it) stands in as scikit-learn's digits upsampled to 28x28 and scaled
    to [0, 1] as input_data scales MNIST."""
    return mnist()
