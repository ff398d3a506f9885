"""TensorFlow-Program-Bugs StackOverflow/IPS-11 (Stack Overflow 43239467): the deep-MNIST convnet whose
fc_layer helper puts a ReLU on every layer, the logits' included, under softmax cross-entropy; the fix
leaves the logits linear."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .standins import Splits, digits, tensors


def layer(module: nn.Module) -> nn.Module:
    """The program's init: weights truncated-normal with stddev 0.1, biases 0.1."""
    nn.init.trunc_normal_(module.weight, 0.0, 0.1, -0.2, 0.2)
    nn.init.constant_(module.bias, 0.1)
    return module


class Buggy(nn.Module):
    """conv 5x5 32 (ReLU, 2x2 max-pool, SAME), conv 5x5 64 (the same), fc 3136 -> 1024 ReLU, fc 1024 -> 10
    ReLU (the fix: no activation)."""
    relu_logits = True

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.conv2 = layer(nn.Conv2d(1, 32, 5, padding=2)), layer(nn.Conv2d(32, 64, 5, padding=2))
        self.fc1, self.fc2 = layer(nn.Linear(7 * 7 * 64, 1024)), layer(nn.Linear(1024, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.max_pool2d(torch.relu(self.conv1(x)), 2)
        h = F.max_pool2d(torch.relu(self.conv2(h)), 2)
        logits = self.fc2(torch.relu(self.fc1(h.flatten(1))))
        return torch.relu(logits) if self.relu_logits else logits


class Fixed(Buggy):
    relu_logits = False


def build() -> Splits:
    """MNIST (input_data downloads it) stands in as scikit-learn's digits upsampled to 28x28 and scaled
    to [0, 1] as input_data scales MNIST."""
    x_train, y_train, x_val, y_val = digits()
    return tensors(x_train / 255, y_train, classification=True), tensors(x_val / 255, y_val, classification=True)
