"""GitHub ShyamPoovaiah/FacialKeypointsDetection, 1_single_hidden_layer.py: 30 keypoint coordinates
regressed from 96x96 pixels by linear Dense 50-100-30 with Adam at lr 0.1; the fix is SGD at lr 0.01,
Nesterov momentum 0.9 and clipnorm 1."""
from __future__ import annotations

import numpy as np
import torch

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors


class Net(KerasNet):
    def __init__(self) -> None:
        super().__init__((9216,), [Dense(50), Dense(100), Dense(30)], "mean_squared_error")


def faces(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n 96x96 images in [0, 1]: 15 bright spots at a fixed face-like layout, shifted by up to 8
    pixels per image and jittered per spot, on a noisy background; the targets are the spots'
    (x, y) scaled to [-1, 1] as the program scales the keypoints ((p - 48) / 48)."""
    g = torch.Generator().manual_seed(seed)
    layout = 25 + 46 * torch.rand(15, 2, generator=g)
    points = layout + 16 * (torch.rand(n, 1, 2, generator=g) - 0.5) + 1.5 * torch.randn(n, 15, 2, generator=g)
    grid = torch.arange(96.0)
    images = 0.05 * torch.rand(n, 96, 96, generator=g)
    for k in range(15):
        across = torch.exp(-((grid - points[:, k, 0, None]) ** 2) / 8.0)  # [n, 96]: x
        down = torch.exp(-((grid - points[:, k, 1, None]) ** 2) / 8.0)  # [n, 96]: y
        images = torch.maximum(images, 0.9 * down[:, :, None] * across[:, None, :])
    return images.reshape(n, -1).numpy(), ((points - 48) / 48).reshape(n, -1).numpy()


def build() -> Splits:
    """Kaggle's training.csv (2140 complete rows) is not in the benchmark: 2140 synthetic images,
    validation_split 0.2 as in the program (its last fifth)."""
    x, y = faces(2140, seed=42)
    return tensors(x[:1712], y[:1712], classification=False), tensors(x[1712:], y[1712:], classification=False)
