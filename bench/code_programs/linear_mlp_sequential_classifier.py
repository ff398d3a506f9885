"""KIND: linear. The spiral classifier's nn.Sequential stacks nn.Linear, nn.Dropout, nn.Linear, nn.Linear with no
activation between them, so the three layers compose to one affine map of the input: the network can only draw
straight class boundaries and cannot separate the interleaved spiral arms, however long it trains."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

N_CLASSES = 3
N_NOISE = 4


class Spirals(Dataset):
    """Three interleaved spiral arms in the first two columns (class = arm), plus noise columns."""

    def __init__(self, n, g):
        self.y = torch.randint(0, N_CLASSES, (n,), generator=g)
        t = torch.rand(n, generator=g)
        radius = 0.2 + 2.0 * t
        angle = 3 * math.pi * t + 2 * math.pi * self.y.float() / N_CLASSES + 0.2 * torch.randn(n, generator=g)
        arm = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
        self.x = torch.cat([arm, 0.5 * torch.randn(n, N_NOISE, generator=g)], dim=1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(66)
    return Spirals(n_train, g), Spirals(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=64, p_drop=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2 + N_NOISE, hidden),  # bug
            nn.Dropout(p_drop),
            nn.Linear(hidden, hidden),  # bug
            nn.Linear(hidden, N_CLASSES),  # bug
        )

    def forward(self, x):
        return self.net(x)


class FixedModel(nn.Module):
    def __init__(self, hidden=64, p_drop=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2 + N_NOISE, hidden),
            nn.ReLU(),
            nn.Dropout(p_drop),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, N_CLASSES),
        )

    def forward(self, x):
        return self.net(x)


def loss(output, batch):
    return F.cross_entropy(output, batch["y"])


def fixed_loss(output, batch):
    return F.cross_entropy(output, batch["y"])
