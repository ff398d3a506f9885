"""KIND: broadcast. A 1-D CNN forecaster predicts the next value as (B, 1) while the target is (B,); the
class-based smooth-L1 criterion broadcasts them into a (B, B) difference instead of pairing sample i with target i."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

WINDOW = 48


def _make(n, g):
    t0 = 200 * torch.rand(n, 1, generator=g)
    t = t0 + torch.arange(WINDOW + 1, dtype=torch.float32)
    series = torch.sin(2 * math.pi * t / 24) + 0.5 * torch.sin(2 * math.pi * t / 7)
    series = series + 0.05 * torch.randn(series.shape, generator=g)
    window, next_value = series[:, :WINDOW], series[:, WINDOW]
    return TensorDataset(window.unsqueeze(1), next_value)  # (n, 1, WINDOW), (n,)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(7)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(1, 16, kernel_size=5),
            nn.ReLU(),
            nn.Conv1d(16, 16, kernel_size=5),
            nn.ReLU(),
        )
        self.fc = nn.Linear(16 * (WINDOW - 8), 1)

    def forward(self, x):
        h = self.conv(x)
        return self.fc(h.flatten(1))  # (B, 1)


class FixedModel(Model):
    pass


class ForecastLoss(nn.Module):
    def __init__(self, beta=0.5):
        super().__init__()
        self.beta = beta

    def forward(self, pred, target):
        return F.smooth_l1_loss(pred, target, beta=self.beta)


_criterion = ForecastLoss()


def loss(output, batch):
    _, next_value = batch
    return _criterion(output, next_value)  # bug


def fixed_loss(output, batch):
    _, next_value = batch
    return _criterion(output.squeeze(1), next_value)
