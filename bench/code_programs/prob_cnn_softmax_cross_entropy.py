"""KIND: probabilities. The CNN's nn.Sequential ends in nn.Softmax(dim=1), and those class probabilities are
passed to F.cross_entropy, which expects raw logits and takes a log_softmax of its own."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

N_CLASSES = 4


def _make_images(n, g):
    # 16x16 grey images; the class says which quadrant holds a bright square
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    x = 0.3 * torch.randn(n, 1, 16, 16, generator=g)
    for i in range(n):
        r, c = divmod(int(y[i]), 2)
        x[i, 0, r * 8 + 2:r * 8 + 6, c * 8 + 2:c * 8 + 6] += 1.5
    return TensorDataset(x, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(1)
    return _make_images(n_train, g), _make_images(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, N_CLASSES),
            nn.Softmax(dim=1),  # bug
        )

    def forward(self, x):
        return self.net(x)


class FixedModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, N_CLASSES),
        )

    def forward(self, x):
        return self.net(x)


def loss(output, batch):
    images, labels = batch
    return F.cross_entropy(output, labels)  # bug


def fixed_loss(output, batch):
    images, labels = batch
    return F.cross_entropy(output, labels)
