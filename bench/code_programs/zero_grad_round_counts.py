"""KIND: zero_grad. The count regressor rounds its prediction with torch.round inside forward ("counts are
integers"), and round has zero gradient everywhere, so no parameter ever receives a gradient."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset


def _make(n, g):
    # daily bike rentals (in tens) from weather-like features
    x = torch.randn(n, 6, generator=g)
    rate = torch.exp(1.0 + 0.5 * x[:, 0] - 0.3 * x[:, 1] + 0.2 * x[:, 2])
    counts = torch.poisson(rate, generator=g)
    return TensorDataset(x, counts.unsqueeze(1))  # (n, 6), (n, 1)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(12)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x):
        rate = F.softplus(self.net(x))
        counts = torch.round(rate)  # bug
        return counts


class FixedModel(Model):
    def forward(self, x):
        return F.softplus(self.net(x))  # round only when reporting, not in training


def loss(output, batch):
    _, counts = batch
    return F.mse_loss(output, counts)


def fixed_loss(output, batch):
    _, counts = batch
    return F.mse_loss(output, counts)
