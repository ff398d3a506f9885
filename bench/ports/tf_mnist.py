"""TensorFlow's beginner MNIST program, which several ported programs start from: a softmax
regression with zeroed weights, on MNIST (stood in for by scikit-learn's digits, see standins)."""
from __future__ import annotations

import torch
from torch import nn

from .standins import Splits, digits, tensors


class SoftmaxRegression(nn.Module):
    """784 -> 10 softmax, W and b zeros, as `tf.Variable(tf.zeros(...))` makes them."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(784, 10)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.linear(x.flatten(1)), dim=1)


def mnist(one_hot: bool = False) -> Splits:
    """MNIST (input_data downloads it) stands in as scikit-learn's digits upsampled to 28x28 and scaled
    to [0, 1] as input_data scales MNIST; `one_hot` float targets for a per-output loss."""
    x_train, y_train, x_val, y_val = digits()
    if one_hot:
        eye = torch.eye(10).numpy()
        return (tensors(x_train / 255, eye[y_train], classification=False),
                tensors(x_val / 255, eye[y_val], classification=False))
    return tensors(x_train / 255, y_train, classification=True), tensors(x_val / 255, y_val, classification=True)
