"""KIND: linear_ok. A gated (bilinear) unit: two nn.Linear branches of the same input are multiplied elementwise,
self.a(x) * self.b(x), then an nn.Linear head reads the product. The product makes the model quadratic in its
input, not one affine map, so it fits the XOR-like target (label = sign of x0 * x1) without any activation
function; both variants are the same correct program."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

N_FEATURES = 6


class Quadrants(Dataset):
    def __init__(self, n, g):
        self.x = torch.randn(n, N_FEATURES, generator=g)
        self.y = (self.x[:, 0] * self.x[:, 1] > 0).long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"x": self.x[i], "y": self.y[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(566)
    return Quadrants(n_train, g), Quadrants(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.a = nn.Linear(N_FEATURES, hidden)
        self.b = nn.Linear(N_FEATURES, hidden)
        self.head = nn.Linear(hidden, 2)

    def forward(self, x):
        return self.head(self.a(x) * self.b(x))


class FixedModel(Model):
    pass


def loss(output, batch):
    return F.cross_entropy(output, batch["y"])


def fixed_loss(output, batch):
    return F.cross_entropy(output, batch["y"])
