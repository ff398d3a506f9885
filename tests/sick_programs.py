"""Programs written the way a user writes plain torch, for the judgement tests: MLPs on raw
tabular columns, a net with an exponential activation, models whose output cannot vary (a softmax
or log-softmax over one unit, a softmax along a dimension of size 1, a sigmoid that raw columns
saturate), logits cut off by a ReLU or a clamp, and rows that were never filled in."""
import numpy as np
import torch
from torch import nn
from torch.utils.data import TensorDataset


def tabular(n: int = 1200, n_val: int = 300, seed: int = 0):
    """Raw clinical-style columns (tens to hundreds); the label a noisy linear rule on them."""
    rng = np.random.default_rng(seed)
    centres, spreads = np.array([120.0, 70.0, 32.0, 33.0, 80.0]), np.array([30.0, 20.0, 8.0, 12.0, 60.0])
    x = np.abs(centres + spreads * rng.standard_normal((n + n_val, 5)))
    z = (x - x.mean(0)) / x.std(0)
    y = (z @ np.array([1.0, -1.0, 0.8, 0.5, 0.2]) + 0.3 * rng.standard_normal(n + n_val) > 0).astype(np.int64)
    t = lambda a, b: TensorDataset(torch.tensor(a, dtype=torch.float32), torch.tensor(b))
    return t(x[:n], y[:n]), t(x[n:], y[n:])


def binary_float(n: int = 1200, n_val: int = 300, seed: int = 0):
    """The same rows, scaled, with the label as a float column [B, 1] (for BCE)."""
    tr, va = tabular(n, n_val, seed)
    mean, std = tr.tensors[0].mean(0), tr.tensors[0].std(0)
    f = lambda d: TensorDataset((d.tensors[0] - mean) / std, d.tensors[1].float()[:, None])
    return f(tr), f(va)


def raw_binary(n: int = 1200, n_val: int = 300, seed: int = 0):
    """The tabular rows in the thousands (a unit off by 20x), the label as a float column [B, 1]."""
    tr, va = tabular(n, n_val, seed)
    f = lambda d: TensorDataset(d.tensors[0] * 20.0, d.tensors[1].float()[:, None])
    return f(tr), f(va)


def sequences(n: int = 900, n_val: int = 300, seed: int = 0, length: int = 12, classes: int = 3):
    """Sequences whose class is which of three frequencies they oscillate at."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, n + n_val)
    t = np.arange(length)
    x = np.sin((y[:, None] + 1) * 0.5 * t[None] + rng.uniform(0, 6, (n + n_val, 1)))[..., None]
    x = x + 0.2 * rng.standard_normal(x.shape)
    d = lambda a, b: TensorDataset(torch.tensor(a, dtype=torch.float32), torch.tensor(b))
    return d(x[:n], y[:n]), d(x[n:], y[n:])


def blank_rows(n: int = 1200, n_val: int = 300, seed: int = 0):
    """Rows left as allocated (zeros, as np.empty often gives) with binary labels: every input alike."""
    tr, va = binary_float(n, n_val, seed)
    return (TensorDataset(torch.zeros_like(tr.tensors[0]), tr.tensors[1]),
            TensorDataset(torch.zeros_like(va.tensors[0]), va.tensors[1]))


class MLP(nn.Module):
    def __init__(self, in_features: int = 5, out_features: int = 2, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, out_features))

    def forward(self, x):
        return self.net(x)


class ReLULogits(MLP):
    """Every layer through a ReLU, the logits' included (a module, or a function in the forward)."""

    def __init__(self, functional: bool = False, out_features: int = 3):
        super().__init__(out_features=out_features)
        self.functional = functional
        if not functional:
            self.net.append(nn.ReLU())

    def forward(self, x):
        return torch.relu(self.net(x)) if self.functional else self.net(x)


class Exp(nn.Module):
    def forward(self, x):
        return torch.exp(x)


class ExpNet(nn.Module):
    """A hidden layer with an exponential activation."""
    def __init__(self, in_features: int = 5, out_features: int = 2, hidden: int = 32):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(in_features, hidden), Exp(), nn.Linear(hidden, out_features)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class SigmoidProbability(nn.Module):
    """A probability from a sigmoid over one unit: right for BCELoss, saturated on raw columns."""
    def __init__(self, in_features: int = 5, hidden: int = 32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x)


class OneUnitSoftmax(nn.Module):
    """A probability of the positive class made by a softmax over one unit."""
    def __init__(self, in_features: int = 5, hidden: int = 16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 1), nn.Softmax(dim=1))

    def forward(self, x):
        return self.net(x)


class OneUnitLogSoftmax(nn.Module):
    def __init__(self, in_features: int = 5, hidden: int = 16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 1),
                                 nn.LogSoftmax(dim=1))

    def forward(self, x):
        return self.net(x)


def bce(output, batch):
    """nn.BCELoss on the model's probability."""
    return nn.functional.binary_cross_entropy(output, batch[1])


class FunctionalOneUnitSoftmax(OneUnitSoftmax):
    """The same one-unit softmax written as a function in forward: no module to replace."""
    def __init__(self, in_features: int = 5, hidden: int = 16):
        super().__init__(in_features, hidden)
        self.net = self.net[:3]

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


class LSTMClassifier(nn.Module):
    """The last step's features as [B, 1, K], a softmax along dim 1 (size 1) instead of the classes."""
    def __init__(self, num_classes: int = 3, hidden: int = 16):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.softmax(self.fc(out[:, -1:, :])).squeeze(1)
