"""KIND: detached. The GRU forecaster computes a temporal-smoothness penalty on its hidden states inside
torch.no_grad(), so the penalty added to the loss has no gradient path to any parameter."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

STEPS = 20
SMOOTH_WEIGHT = 0.1


def _make(n, g):
    t = torch.arange(STEPS + 1, dtype=torch.float32)
    freq = 0.2 + 0.3 * torch.rand(n, 1, generator=g)
    amp = 0.5 + torch.rand(n, 1, generator=g)
    base = amp * torch.sin(freq * t)
    x = torch.stack([base, torch.cos(freq * t).expand_as(base), freq.expand_as(base)], dim=-1)
    x = x + 0.05 * torch.randn(x.shape, generator=g)
    return TensorDataset(x[:, :STEPS], base[:, STEPS:STEPS + 1])  # (n, STEPS, 3), (n, 1)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(11)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.gru = nn.GRU(3, hidden, num_layers=1, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.gru(x)
        pred = self.head(out[:, -1])
        with torch.no_grad():  # bug
            smoothness = (out[:, 1:] - out[:, :-1]).pow(2).mean()  # bug
        return pred, smoothness


class FixedModel(Model):
    def forward(self, x):
        out, _ = self.gru(x)
        pred = self.head(out[:, -1])
        smoothness = (out[:, 1:] - out[:, :-1]).pow(2).mean()
        return pred, smoothness


def loss(output, batch):
    pred, smoothness = output
    _, y = batch
    mse = F.mse_loss(pred, y)
    total = mse + SMOOTH_WEIGHT * smoothness  # bug
    return {"loss": total, "mse": mse, "smoothness": smoothness}


def fixed_loss(output, batch):
    pred, smoothness = output
    _, y = batch
    mse = F.mse_loss(pred, y)
    total = mse + SMOOTH_WEIGHT * smoothness
    return {"loss": total, "mse": mse, "smoothness": smoothness}
