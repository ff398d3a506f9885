"""KIND: broadcast. The regressor outputs (B, 1) but the targets collate to (B,), so F.mse_loss broadcasts them
to a (B, B) grid and fits every prediction to the batch mean target."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset


def _make(n, g):
    x = torch.randn(n, 8, generator=g)
    y = 2.0 * x[:, 0] - x[:, 1] + 0.5 * x[:, 2] * x[:, 3] + 0.1 * torch.randn(n, generator=g)  # shape (n,)
    return TensorDataset(x, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(6)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(8, 64),
            nn.ReLU(),
            nn.Linear(64, 64),
            nn.ReLU(),
            nn.Linear(64, 1),
        )

    def forward(self, x):
        return self.net(x)


class FixedModel(Model):
    pass


def loss(output, batch):
    _, y = batch
    return F.mse_loss(output, y)  # bug


def fixed_loss(output, batch):
    _, y = batch
    return F.mse_loss(output.squeeze(-1), y)
