"""KIND: saturation. The energy-use regressor keeps the raw Unix timestamp (~1.7e9 s) among its inputs; the
first layer's torch.tanh is then exactly +1 or -1 for every sample, so the prediction is the same for the whole batch."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

T0 = 1_700_000_000.0
YEAR = 365 * 24 * 3600.0


class Meter(Dataset):
    def __init__(self, n, g):
        ts = T0 + YEAR * torch.rand(n, generator=g, dtype=torch.float64)
        temp_c = 12 + 10 * torch.sin(2 * math.pi * (ts - T0) / YEAR) + 2 * torch.randn(n, generator=g, dtype=torch.float64)
        humidity = 40 + 30 * torch.rand(n, generator=g, dtype=torch.float64)
        hour = ((ts % 86400) / 3600).floor()
        kwh = 1.0 + 0.08 * (temp_c - 18).abs() + 0.5 * ((hour >= 17) & (hour <= 22)).double() + 0.005 * humidity
        self.features = torch.stack([ts, temp_c, humidity, hour], dim=1).float()   # raw units
        self.kwh = kwh.float().unsqueeze(1)

    def __len__(self):
        return len(self.kwh)

    def __getitem__(self, i):
        return {"features": self.features[i], "kwh": self.kwh[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(19)
    return Meter(n_train, g), Meter(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(4, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, features):
        z = self.fc1(features)
        h = torch.tanh(z)  # bug
        h = F.relu(self.fc2(h))
        return self.out(h)


class FixedModel(Model):
    def forward(self, features):
        ts, temp_c, humidity, hour = features.unbind(dim=1)
        day_angle = 2 * math.pi * ((ts - T0) / YEAR)
        x = torch.stack([torch.sin(day_angle), (temp_c - 12) / 10, (humidity - 55) / 10, (hour - 12) / 7], dim=1)
        h = torch.tanh(self.fc1(x))
        h = F.relu(self.fc2(h))
        return self.out(h)


def loss(output, batch):
    return F.mse_loss(output, batch["kwh"])


def fixed_loss(output, batch):
    return F.mse_loss(output, batch["kwh"])
