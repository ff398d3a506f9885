"""KIND: linear. The regressor's forward calls self.fc1, self.fc2 and self.fc3 one after another with no activation
in between (the final .view only reshapes), so the model is a single affine map of its inputs and cannot fit the
target sin(2*x0) + |x1|: it settles on the best straight-plane fit and the loss plateaus well above the noise."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

N_FEATURES = 5


class Wave(Dataset):
    def __init__(self, n, g):
        self.x = 2.0 * torch.randn(n, N_FEATURES, generator=g)
        self.y = torch.sin(2.0 * self.x[:, 0]) + self.x[:, 1].abs() + 0.05 * torch.randn(n, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(166)
    return Wave(n_train, g), Wave(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(N_FEATURES, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.fc1(x)  # bug
        h = self.fc2(h)  # bug
        return self.fc3(h).view(-1)  # bug


class FixedModel(Model):
    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        h = torch.tanh(self.fc2(h))
        return self.fc3(h).view(-1)


def loss(output, batch):
    return F.mse_loss(output, batch["y"])


def fixed_loss(output, batch):
    return F.mse_loss(output, batch["y"])
