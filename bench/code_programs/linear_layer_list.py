"""KIND: linear. The checkerboard classifier builds its layers with a list comprehension of nn.Linear over
consecutive widths (pairwise(dims)) and hands them to nn.Sequential(*layers), but nothing is put between them, so
the stack of four layers is one affine map and the XOR-like checkerboard classes (label = parity of the cell) stay
inseparable."""
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

N_FEATURES = 6
CELLS = 2  # a CELLS x CELLS checkerboard over [-1, 1)^2 in the first two columns


class Checkerboard(Dataset):
    def __init__(self, n, g):
        self.x = torch.cat([2 * torch.rand(n, 2, generator=g) - 1,
                            torch.randn(n, N_FEATURES - 2, generator=g)], dim=1)
        cell = ((self.x[:, :2] + 1) / 2 * CELLS).floor().long().clamp(0, CELLS - 1)
        self.y = (cell[:, 0] + cell[:, 1]) % 2

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(266)
    return Checkerboard(n_train, g), Checkerboard(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, dims=(N_FEATURES, 64, 64, 32, 2)):
        super().__init__()
        layers = [nn.Linear(d_in, d_out) for d_in, d_out in pairwise(dims)]  # bug
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class FixedModel(nn.Module):
    def __init__(self, dims=(N_FEATURES, 64, 64, 32, 2)):
        super().__init__()
        layers = []
        for d_in, d_out in pairwise(dims):
            layers += [nn.Linear(d_in, d_out), nn.GELU()]
        self.net = nn.Sequential(*layers[:-1])  # no activation after the last layer: it gives logits

    def forward(self, x):
        return self.net(x)


def loss(output, batch):
    return F.cross_entropy(output, batch["y"])


def fixed_loss(output, batch):
    return F.cross_entropy(output, batch["y"])
