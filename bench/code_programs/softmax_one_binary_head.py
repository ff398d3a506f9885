"""KIND: softmax_one. A binary classifier with a single output unit turns it into a probability with
F.softmax(..., dim=1); over a dimension of size 1 that is always exactly 1.0, whatever the input."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset


def _make(n, g):
    x = torch.randn(n, 10, generator=g)
    y = ((x[:, 0] + x[:, 1] * x[:, 2] - 0.5 * x[:, 3]) > 0).float().unsqueeze(1)  # (n, 1)
    return TensorDataset(x, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(3)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(10, 32),
            nn.ReLU(),
            nn.Linear(32, 32),
            nn.ReLU(),
        )
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        logit = self.head(self.body(x))
        prob = F.softmax(logit, dim=1)  # bug
        return prob


class FixedModel(Model):
    def forward(self, x):
        logit = self.head(self.body(x))
        prob = torch.sigmoid(logit)
        return prob


def loss(output, batch):
    _, y = batch
    return F.binary_cross_entropy(output, y)


def fixed_loss(output, batch):
    _, y = batch
    return F.binary_cross_entropy(output, y)
