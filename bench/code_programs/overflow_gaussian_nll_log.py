"""KIND: overflow. A heteroscedastic regressor predicts its variance with a plain Linear head (no softplus),
and the Gaussian NLL takes torch.log(var); for samples where the head is negative the log is NaN on the first batch."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset


N_FEATURES = 8


def _make(n, g):
    x = torch.randn(n, N_FEATURES, generator=g)
    noise_std = 0.1 + 0.4 * x[:, :1].abs()                 # noise grows with |x0|
    y = torch.sin(2 * x[:, :1]) + 0.5 * x[:, 1:2] + noise_std * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(16)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=128):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(N_FEATURES, hidden), nn.Tanh())
        self.mean_head = nn.Linear(hidden, 1)
        self.var_head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.trunk(x)
        mean = self.mean_head(h)
        var = self.var_head(h)
        return mean, var


class FixedModel(Model):
    def forward(self, x):
        h = self.trunk(x)
        mean = self.mean_head(h)
        var = F.softplus(self.var_head(h)) + 1e-6
        return mean, var


def loss(output, batch):
    mean, var = output
    _, y = batch
    log_var = torch.log(var)  # bug
    nll = 0.5 * (log_var + (y - mean) ** 2 / var)
    return nll.mean()


def fixed_loss(output, batch):
    mean, var = output
    _, y = batch
    log_var = torch.log(var)
    nll = 0.5 * (log_var + (y - mean) ** 2 / var)
    return nll.mean()
