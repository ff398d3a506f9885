"""defects4ml bug 086 (Stack Overflow 45378493): a Conv1D / batch-norm / LeakyReLU network whose one
output goes through a softmax, which over one unit is 1 whatever the input, under binary
cross-entropy; the fix is a sigmoid."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .keras_like import binary_logits, initialise
from .standins import Splits, tensors


def batch_norm(features: int) -> nn.BatchNorm1d:
    """Keras' BatchNormalization(): momentum 0.99 (torch's 0.01), epsilon 1e-3."""
    return nn.BatchNorm1d(features, eps=1e-3, momentum=0.01)


class Buggy(nn.Module):
    """Conv1D(16, 4, same) - BN - LeakyReLU - Dropout(0.2) - Conv1D(8, 4, same) - BN - LeakyReLU -
    Dropout(0.2) - Flatten - Dense(64) - BN - LeakyReLU - Dense(1) - softmax; Keras' glorot-uniform
    kernels, zero biases, LeakyReLU's alpha 0.3. The output p becomes two-class logits with Keras'
    clip of p to [1e-7, 1 - 1e-7] (keras_like.binary_logits): Keras' binary cross-entropy."""
    out = "softmax"

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = nn.Conv1d(4, 16, 4, padding="same"), nn.Conv1d(16, 8, 4, padding="same")
        self.dense1, self.dense2 = nn.Linear(80, 64), nn.Linear(64, 1)
        for layer, fan_in, fan_out in ((self.conv1, 16, 64), (self.conv2, 64, 32), (self.dense1, 80, 64),
                                       (self.dense2, 64, 1)):
            initialise(layer.weight, "glorot_uniform", fan_in, fan_out)
            nn.init.zeros_(layer.bias)
        self.bn1, self.bn2, self.bn3 = batch_norm(16), batch_norm(8), batch_norm(64)
        self.act, self.drop = nn.LeakyReLU(0.3), nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [B, 10, 4], Keras' (steps, channels)
        h = self.drop(self.act(self.bn1(self.conv1(x.transpose(1, 2)))))
        h = self.drop(self.act(self.bn2(self.conv2(h))))
        h = self.act(self.bn3(self.dense1(h.flatten(1))))
        z = self.dense2(h)
        p = torch.softmax(z, dim=1) if self.out == "softmax" else torch.sigmoid(z)
        return binary_logits(p)


class Fixed(Buggy):
    out = "sigmoid"


def build() -> Splits:
    """The program's X_train = np.empty([6000, 10, 4]) (a fresh allocation that size is zeros) and
    y_train = np.eye(6000, 1) (row 0 is 1, the rest 0). Its validation data is one uninitialised row
    labelled 1, and its measure (and its test's) the final training loss: the port validates on the
    training rows."""
    x = np.zeros((6000, 10, 4), dtype=np.float32)
    y = np.eye(6000, 1)[:, 0].astype(np.int64)
    return tensors(x, y, classification=True), tensors(x, y, classification=True)
