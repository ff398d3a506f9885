"""KIND: broadcast. A rating model returns (B, 1) while batch["rating"] is (B,); the hand-written squared error
subtracts them into a (B, B) matrix, silently, with no warning from PyTorch."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

N_USERS = 50
N_ITEMS = 40


class Ratings(Dataset):
    def __init__(self, n, g, user_f, item_f):
        self.user = torch.randint(0, N_USERS, (n,), generator=g)
        self.item = torch.randint(0, N_ITEMS, (n,), generator=g)
        r = 3.0 + (user_f[self.user] * item_f[self.item]).sum(-1) + 0.1 * torch.randn(n, generator=g)
        self.rating = r.clamp(1.0, 5.0)

    def __len__(self):
        return len(self.rating)

    def __getitem__(self, i):
        return {"user": self.user[i], "item": self.item[i], "rating": self.rating[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(8)
    user_f = torch.randn(N_USERS, 4, generator=g) * 0.6
    item_f = torch.randn(N_ITEMS, 4, generator=g) * 0.6
    return Ratings(n_train, g, user_f, item_f), Ratings(max(n_train // 4, 64), g, user_f, item_f)


class Model(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.user_emb = nn.Embedding(N_USERS, dim)
        self.item_emb = nn.Embedding(N_ITEMS, dim)
        self.mlp = nn.Sequential(nn.Linear(3 * dim, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, user, item):
        u = self.user_emb(user)
        v = self.item_emb(item)
        return 3.0 + self.mlp(torch.cat([u, v, u * v], dim=-1))  # (B, 1)


class FixedModel(Model):
    pass


def loss(output, batch):
    diff = output - batch["rating"]  # bug
    return (diff ** 2).mean()


def fixed_loss(output, batch):
    diff = output.squeeze(-1) - batch["rating"]
    return (diff ** 2).mean()
