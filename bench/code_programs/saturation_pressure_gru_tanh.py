"""KIND: saturation. Hourly barometric pressure in pascals (~10^5) goes through a Linear + tanh input projection
before the GRU; every projected value is exactly +1 or -1 for every sample, so the GRU sees the same sequence for all."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

HOURS = 24


def _make(n, g):
    start = 101325.0 + 1500.0 * torch.randn(n, 1, generator=g)
    trend = 80.0 * torch.randn(n, 1, generator=g)                  # Pa per hour
    t = torch.arange(HOURS, dtype=torch.float32)
    pressure = start + trend * t + 30.0 * torch.randn(n, HOURS, generator=g)
    rain = ((trend.squeeze(1) < -20.0) | (start.squeeze(1) < 100000.0)).long()  # falling or low pressure
    return TensorDataset(pressure.unsqueeze(-1), rain)              # (n, HOURS, 1), (n,)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(20)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.proj = nn.Linear(1, 16)
        self.gru = nn.GRU(16, hidden, batch_first=True)
        self.cls = nn.Linear(hidden, 2)

    def forward(self, pressure):
        z = self.proj(pressure)
        x = torch.tanh(z)  # bug
        _, h_n = self.gru(x)
        return self.cls(h_n[-1])


class FixedModel(Model):
    def forward(self, pressure):
        z = (pressure - 101325.0) / 1500.0  # standardise to roughly zero mean, unit spread
        x = torch.tanh(self.proj(z))
        _, h_n = self.gru(x)
        return self.cls(h_n[-1])


def loss(output, batch):
    _, rain = batch
    return F.cross_entropy(output, rain)


def fixed_loss(output, batch):
    _, rain = batch
    return F.cross_entropy(output, rain)
