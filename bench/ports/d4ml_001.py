"""defects4ml bug 001 (tensorflow/models d816971, transformer/cluttered_mnist.py): a spatial transformer
network on cluttered MNIST whose loss is written by hand, `-tf.reduce_sum(y * tf.log(y_pred))` on the
softmax's output, which is NaN once a probability underflows to 0; the fix is
`softmax_cross_entropy_with_logits` on the logits, averaged over the batch."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .standins import Splits, digits, tensors

SIDE = 40


class Fixed(nn.Module):
    """The program's layers: a two-layer tanh localisation net (1600-20-6, its last bias the identity
    transform) and a bilinear sampler (torch's affine_grid/grid_sample for the program's own
    `transformer`), two 3x3 convolutions of 16 with stride 2 (ReLU), a 1024-unit ReLU layer and 10
    outputs; dropout at keep_prob 0.8 after the localisation layer and the 1024 units. As in its
    tf_utils, every weight starts at 0 and every bias at N(0, 0.01)."""

    def __init__(self) -> None:
        super().__init__()
        self.loc1, self.loc2 = nn.Linear(SIDE * SIDE, 20), nn.Linear(20, 6)
        self.conv1, self.conv2 = nn.Conv2d(1, 16, 3, stride=2, padding=1), nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.fc1, self.fc2 = nn.Linear(10 * 10 * 16, 1024), nn.Linear(1024, 10)
        self.drop = nn.Dropout(0.2)
        for layer in (self.loc1, self.loc2, self.conv1, self.conv2, self.fc1, self.fc2):
            nn.init.zeros_(layer.weight)
            nn.init.normal_(layer.bias, 0.0, 0.01)
        with torch.no_grad():
            self.loc2.bias.copy_(torch.tensor([1.0, 0, 0, 0, 1.0, 0]))

    def logits(self, x: torch.Tensor) -> torch.Tensor:  # x: [B, 1600]
        theta = torch.tanh(self.loc2(self.drop(torch.tanh(self.loc1(x))))).view(-1, 2, 3)
        image = x.view(-1, 1, SIDE, SIDE)
        grid = F.affine_grid(theta, list(image.shape), align_corners=False)
        h = F.grid_sample(image, grid, align_corners=False)
        h = torch.relu(self.conv2(torch.relu(self.conv1(h))))
        return self.fc2(self.drop(torch.relu(self.fc1(h.flatten(1)))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits(x)


class Buggy(Fixed):
    """y_pred = softmax(logits) and the loss -sum(y * log(y_pred)): the output is log(y_pred) as the
    program computes it (unclipped: a probability that underflows to 0 gives -inf, and its gradient
    NaN), and the harness's cross-entropy of log-probabilities is -log(y_pred) of the label, since
    log_softmax(log p) = log p when p sums to 1."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.softmax(self.logits(x), dim=1))


def cluttered(images: np.ndarray, labels: np.ndarray, n: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """n 40x40 canvases: one 28x28 digit at a random place, and 5 random 5x5 crops of other digits
    at random places (mnist_sequence1_sample_5distortions5x5's recipe), pixels in [0, 1]."""
    canvas = np.zeros((n, SIDE, SIDE), dtype=np.float32)
    picks = rng.integers(0, len(images), n)
    for i, k in enumerate(picks):
        for _ in range(5):
            other = images[rng.integers(0, len(images))]
            r, c = rng.integers(0, 28 - 5, 2)
            R, C = rng.integers(0, SIDE - 5, 2)
            canvas[i, R:R + 5, C:C + 5] = np.maximum(canvas[i, R:R + 5, C:C + 5], other[r:r + 5, c:c + 5])
        r, c = rng.integers(0, SIDE - 28 + 1, 2)
        canvas[i, r:r + 28, c:c + 28] = np.maximum(canvas[i, r:r + 28, c:c + 28], images[k])
    return canvas.reshape(n, -1), labels[picks]


def build(n_train: int = 10000, n_val: int = 1000) -> Splits:
    """Stand-in for mnist_sequence1_sample_5distortions5x5.npz (in the collection, not redistributed
    here): 10000 training and 1000 validation canvases built from scikit-learn's digits upsampled to
    28x28 (the validation canvases from digits the training ones never use)."""
    x_train, y_train, x_val, y_val = digits()
    rng = np.random.default_rng(1)
    train = cluttered(x_train[:, 0] / 255.0, y_train, n_train, rng)
    val = cluttered(x_val[:, 0] / 255.0, y_val, n_val, rng)
    return tensors(*train, classification=True), tensors(*val, classification=True)
