"""KIND: saturation. The fraud model feeds the raw transaction amount in cents (10^6 to 10^8) straight into
Linear -> nn.Sigmoid; every hidden sigmoid is pinned at exactly 0.0 or 1.0, the same for every transaction."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset


def _make(n, g):
    log10_amount = 6.0 + 2.0 * torch.rand(n, 1, generator=g)       # $10k .. $1M, in cents
    amount_cents = torch.pow(10.0, log10_amount)
    p_fraud = torch.sigmoid(3.0 * (log10_amount - 7.2))
    y = (torch.rand(n, 1, generator=g) < p_fraud).float()
    return TensorDataset(amount_cents, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(18)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(1, hidden),
            nn.Sigmoid(),  # bug
            nn.Linear(hidden, 1),
        )

    def forward(self, amount):
        return self.net(amount)


class FixedModel(Model):
    def forward(self, amount):
        z = torch.log10(amount) - 7.0  # bring the amount to a sane scale first
        return self.net(z)


def loss(output, batch):
    _, y = batch
    return F.binary_cross_entropy_with_logits(output, y)


def fixed_loss(output, batch):
    _, y = batch
    return F.binary_cross_entropy_with_logits(output, y)
