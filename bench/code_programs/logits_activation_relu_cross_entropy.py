"""KIND: logits_activation. The ring classifier's nn.Sequential ends in an nn.ReLU() after its last nn.Linear, so
every negative logit is cut to 0 before F.cross_entropy reads them: the cut logits get no gradient and a class
whose logits all go negative can never be pushed back up."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

N_CLASSES = 3
N_NOISE = 6


class Rings(Dataset):
    """Concentric rings in the first two columns (class = ring), plus noise columns."""

    def __init__(self, n, g):
        self.y = torch.randint(0, N_CLASSES, (n,), generator=g)
        radius = 1.0 + self.y.float() + 0.15 * torch.randn(n, generator=g)
        angle = 2 * math.pi * torch.rand(n, generator=g)
        ring = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
        self.x = torch.cat([ring, torch.randn(n, N_NOISE, generator=g)], dim=1)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(61)
    return Rings(n_train, g), Rings(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2 + N_NOISE, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden // 2),
            nn.ReLU(),
            nn.Linear(hidden // 2, N_CLASSES),
            nn.ReLU(),  # bug
        )

    def forward(self, x):
        return self.net(x)


class FixedModel(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(2 + N_NOISE, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden // 2),
            nn.ReLU(),
            nn.Linear(hidden // 2, N_CLASSES),
        )

    def forward(self, x):
        return self.net(x)


def loss(output, batch):
    return F.cross_entropy(output, batch["y"])


def fixed_loss(output, batch):
    return F.cross_entropy(output, batch["y"])
