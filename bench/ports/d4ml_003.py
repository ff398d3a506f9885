"""defects4ml bug 003 (gabrieleangeletti/Deep-Learning-TensorFlow 726b371, run_logistic_regression.py):
a softmax regression on MNIST whose hand-written binary cross-entropy over the 10 outputs,
`-mean(y * log(p) + (1 - y) * log(1 - p))`, is NaN once p reaches 0 or 1; the fix clips p and 1 - p
at 1e-10 before the log."""
from __future__ import annotations

import torch

from .standins import Splits
from .tf_mnist import SoftmaxRegression, mnist


class Buggy(SoftmaxRegression):
    """784 -> 10 softmax, weights and biases 0. The harness's bce (binary cross-entropy with logits,
    averaged over every output as the program's reduce_mean is) reads the logits log(p) - log(1 - p),
    whose sigmoid is p: the program's loss, NaN where it is NaN (p = 0 or 1 gives 0 * inf)."""
    clip = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.probabilities(x)
        if self.clip:  # tf.clip_by_value(p, 1e-10, inf) and tf.clip_by_value(1 - p, 1e-10, inf)
            return torch.log(p.clamp(min=self.clip)) - torch.log((1 - p).clamp(min=self.clip))
        return torch.log(p) - torch.log(1 - p)


class Fixed(Buggy):
    clip = 1e-10


def build() -> Splits:
    """MNIST (the program's datasets.load_mnist_dataset, a download) stands in as scikit-learn's
    digits upsampled to 28x28 and scaled to [0, 1] as input_data scales MNIST; one-hot float targets,
    as the program feeds them to its per-output loss."""
    return mnist(one_hot=True)
