"""KIND: zero_grad. A hashing network binarises its code with torch.sign before the classifier; sign has zero
gradient everywhere, so the conv encoder and the code layer never receive a gradient and only the last layer learns."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

N_CLASSES = 3


def _make(n, g):
    # 3-channel 8x8 patches; the class is the channel that carries a centred blob
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    x = 0.5 * torch.randn(n, 3, 8, 8, generator=g)
    x[torch.arange(n), y, 2:6, 2:6] += 1.0
    return TensorDataset(x, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(13)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, n_bits=16):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.to_code = nn.Linear(16 * 4 * 4, n_bits)
        self.classifier = nn.Linear(n_bits, N_CLASSES)

    def forward(self, x):
        h = self.encoder(x)
        z = self.to_code(h)
        codes = torch.sign(z)  # bug
        return self.classifier(codes)


class FixedModel(Model):
    def forward(self, x):
        h = self.encoder(x)
        codes = torch.tanh(self.to_code(h))  # relaxed codes; take the sign at retrieval time
        return self.classifier(codes)


def loss(output, batch):
    _, y = batch
    return F.cross_entropy(output, y)


def fixed_loss(output, batch):
    _, y = batch
    return F.cross_entropy(output, y)
