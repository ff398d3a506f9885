"""KIND: softmax_one. The 1-D CNN returns logits shaped (B, 1, K) and the objective takes
F.log_softmax over dim=1, the size-1 axis, so every log-probability is exactly 0 and the loss never moves."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

N_CLASSES = 5
LENGTH = 64


def _make(n, g):
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    t = torch.arange(LENGTH, dtype=torch.float32)
    freq = (1.0 + y.float())[:, None] * 2 * math.pi / 16
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    x = torch.sin(freq * t + phase) + 0.3 * torch.randn(n, LENGTH, generator=g)
    return TensorDataset(x.unsqueeze(1), y)  # (n, 1, LENGTH)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(5)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.Conv1d(16, 32, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool1d(1),
        )
        self.classifier = nn.Linear(32, N_CLASSES)

    def forward(self, x):
        h = self.features(x)                         # (B, 32, 1)
        return self.classifier(h.transpose(1, 2))    # (B, 1, K)


class FixedModel(Model):
    pass


def loss(output, batch):
    _, y = batch
    log_probs = F.log_softmax(output, dim=1)  # bug
    return F.nll_loss(log_probs.squeeze(1), y)


def fixed_loss(output, batch):
    _, y = batch
    log_probs = F.log_softmax(output, dim=-1)
    return F.nll_loss(log_probs.squeeze(1), y)
