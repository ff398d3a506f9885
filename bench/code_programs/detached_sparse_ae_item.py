"""KIND: detached. A denoising conv autoencoder adds an L1 sparsity penalty on its code, but takes it with
.item(), so the penalty is a plain Python float in the loss and the code is never pushed towards sparsity."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import TensorDataset

SPARSITY_WEIGHT = 0.05


def _make(n, g):
    # clean images: a bright horizontal or vertical bar at a random position
    clean = torch.zeros(n, 1, 16, 16)
    pos = torch.randint(2, 14, (n,), generator=g)
    vertical = torch.rand(n, generator=g) < 0.5
    for i in range(n):
        p = int(pos[i])
        if vertical[i]:
            clean[i, 0, :, p - 1:p + 1] = 1.0
        else:
            clean[i, 0, p - 1:p + 1, :] = 1.0
    noisy = clean + 0.3 * torch.randn(clean.shape, generator=g)
    return TensorDataset(noisy, clean)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(10)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 8, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1),
            nn.ReLU(),
            nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1),
        )

    def forward(self, x):
        code = self.encoder(x)
        return self.decoder(code), code


class FixedModel(Model):
    pass


def loss(output, batch):
    recon, code = output
    _, clean = batch
    rec = F.mse_loss(recon, clean)
    l1 = code.abs().mean().item()  # bug
    total = rec + SPARSITY_WEIGHT * l1  # bug
    return total


def fixed_loss(output, batch):
    recon, code = output
    _, clean = batch
    rec = F.mse_loss(recon, clean)
    l1 = code.abs().mean()
    total = rec + SPARSITY_WEIGHT * l1
    return total
