"""KIND: overflow. The house-price MLP uses a hand-written softplus, torch.log(1 + torch.exp(z)), on raw
square-footage / year features; its hidden pre-activations are in the hundreds, exp overflows to inf and the output is inf/NaN."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset


def _make(n, g):
    sqft = 600 + 3000 * torch.rand(n, generator=g)
    bedrooms = torch.randint(1, 6, (n,), generator=g).float()
    year_built = 1950 + 70 * torch.rand(n, generator=g)
    lot_acres = 0.1 + 2 * torch.rand(n, generator=g)
    x = torch.stack([sqft, bedrooms, year_built, lot_acres], dim=1)  # raw units
    price = 0.8 + 1.2 * (sqft / 1000) + 0.1 * bedrooms + 0.01 * (year_built - 1950) + 0.2 * lot_acres
    price = price + 0.1 * torch.randn(n, generator=g)                # in $100k
    return TensorDataset(x, price.unsqueeze(1))


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(15)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


def smooth_relu(z):
    e = torch.exp(z)  # bug
    return torch.log(1 + e)


class Model(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.fc1 = nn.Linear(4, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x):
        h = smooth_relu(self.fc1(x))
        h = smooth_relu(self.fc2(h))
        return self.out(h)


# feature means / spreads of the training distribution, for standardising inside the fixed model
_MEAN = torch.tensor([2100.0, 3.0, 1985.0, 1.1])
_STD = torch.tensor([870.0, 1.4, 20.0, 0.58])


class FixedModel(Model):
    def forward(self, x):
        x = (x - _MEAN) / _STD
        h = F.softplus(self.fc1(x))  # thresholded softplus: linear for large inputs, never overflows
        h = F.softplus(self.fc2(h))
        return self.out(h)


def loss(output, batch):
    _, price = batch
    return F.mse_loss(output, price)


def fixed_loss(output, batch):
    _, price = batch
    return F.mse_loss(output, price)
