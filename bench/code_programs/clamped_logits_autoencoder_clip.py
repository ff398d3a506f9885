"""KIND: clamped_logits. The autoencoder's decoder ends in a plain nn.Linear (no sigmoid), yet the objective reads
its output as pixel probabilities: torch.clamp(recon, 1e-5, 1 - 1e-5) then a hand-written per-pixel BCE, so every
pixel whose output falls outside (0, 1) (about half of them at the start) gets zero gradient."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

SIDE = 10
DIM = SIDE * SIDE


class Blobs(Dataset):
    """Soft Gaussian blobs at random positions, pixel intensities in [0, 1]."""

    def __init__(self, n, g):
        centre = 2 + 6 * torch.rand(n, 2, generator=g)
        width = 1.0 + torch.rand(n, 1, 1, generator=g)
        grid = torch.arange(SIDE, dtype=torch.float32)
        dy = (grid[None, :, None] - centre[:, 0, None, None]) ** 2
        dx = (grid[None, None, :] - centre[:, 1, None, None]) ** 2
        self.pixels = torch.exp(-(dx + dy) / (2 * width ** 2)).flatten(1)

    def __len__(self):
        return len(self.pixels)

    def __getitem__(self, i):
        return {"pixels": self.pixels[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(101)
    return Blobs(n_train, g), Blobs(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=64, code=6):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(DIM, hidden), nn.ELU(), nn.Linear(hidden, code))
        self.decoder = nn.Sequential(nn.Linear(code, hidden), nn.ELU(), nn.Linear(hidden, DIM))

    def forward(self, pixels):
        return self.decoder(self.encoder(pixels))


class FixedModel(Model):
    pass


def loss(output, batch):
    x = batch["pixels"]
    recon = torch.clamp(output, 1e-5, 1 - 1e-5)  # bug
    bce = -(
        x * torch.log(recon)  # bug
        + (1 - x) * torch.log(1 - recon)  # bug
    )
    return bce.sum(dim=1).mean()


def fixed_loss(output, batch):
    x = batch["pixels"]
    bce = F.binary_cross_entropy_with_logits(output, x, reduction="none")
    return bce.sum(dim=1).mean()
