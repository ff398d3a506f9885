"""KIND: linear_ok. A logistic regression: one nn.Linear from the features to two logits, trained with
F.cross_entropy on classes that a plane separates. A single layer is meant to be linear here, there is no stack of
layers missing an activation, and both variants are the same correct program."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

N_FEATURES = 10


class Separable(Dataset):
    """Label = side of a fixed hyperplane, with a margin: points too close to it are pushed out."""

    def __init__(self, n, g, w, b):
        x = torch.randn(n, N_FEATURES, generator=g)
        score = x @ w + b
        self.y = (score > 0).long()
        self.x = x + 0.5 * torch.where(score > 0, 1.0, -1.0)[:, None] * w / w.norm()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"features": self.x[i], "label": self.y[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(466)
    w, b = torch.randn(N_FEATURES, generator=g), 0.3
    return Separable(n_train, g, w, b), Separable(max(n_train // 4, 64), g, w, b)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(N_FEATURES, 2)

    def forward(self, features):
        return self.linear(features)


class FixedModel(Model):
    pass


def loss(output, batch):
    return F.cross_entropy(output, batch["label"])


def fixed_loss(output, batch):
    return F.cross_entropy(output, batch["label"])
