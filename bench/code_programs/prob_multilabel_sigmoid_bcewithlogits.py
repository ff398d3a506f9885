"""KIND: probabilities. The multi-label tagger's forward already squashes its outputs with torch.sigmoid, and
those probabilities are then given to nn.BCEWithLogitsLoss, which applies a second sigmoid inside."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

N_FEATURES = 40
N_TAGS = 12


def _make_split(n, g, w):
    x = torch.randn(n, N_FEATURES, generator=g)
    scores = x @ w / N_FEATURES ** 0.5 + 0.3 * torch.randn(n, N_TAGS, generator=g)
    y = (scores > 0.5).float()  # each sample carries several tags at once
    return TensorDataset(x, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(N_FEATURES, N_TAGS, generator=g)
    return _make_split(n_train, g, w), _make_split(max(n_train // 4, 64), g, w)


class Model(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.hidden = nn.Sequential(
            nn.Linear(N_FEATURES, hidden),
            nn.ReLU(),
            nn.Dropout(0.1),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.out = nn.Linear(hidden, N_TAGS)

    def forward(self, x):
        h = self.hidden(x)
        logits = self.out(h)
        return torch.sigmoid(logits)  # bug


class FixedModel(Model):
    def forward(self, x):
        h = self.hidden(x)
        return self.out(h)  # raw logits; BCEWithLogitsLoss does the sigmoid


criterion = nn.BCEWithLogitsLoss()


def loss(output, batch):
    _, tags = batch
    return criterion(output, tags)  # bug


def fixed_loss(output, batch):
    _, tags = batch
    return criterion(output, tags)
