"""KIND: detached. The VAE objective computes its KL term from mu.detach() and logvar.detach() (copied from a
logging snippet), so the KL is added to the loss but sends no gradient to the encoder: the posterior is never regularised."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

DIM = 64


class Patterns(Dataset):
    """Noisy versions of a handful of prototype patterns in [0, 1]."""

    def __init__(self, n, g, prototypes):
        idx = torch.randint(0, len(prototypes), (n,), generator=g)
        x = prototypes[idx] + 0.1 * torch.randn(n, DIM, generator=g)
        self.x = x.clamp(0.0, 1.0)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(9)
    prototypes = torch.rand(6, DIM, generator=g).round()
    return Patterns(n_train, g, prototypes), Patterns(max(n_train // 4, 64), g, prototypes)


class Model(nn.Module):
    def __init__(self, hidden=128, latent=8):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(DIM, hidden), nn.ReLU())
        self.mu = nn.Linear(hidden, latent)
        self.logvar = nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, DIM))

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        return mu + std * torch.randn_like(std)

    def forward(self, x):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = self.reparameterize(mu, logvar)
        return self.dec(z), mu, logvar


class FixedModel(Model):
    pass


def loss(output, batch):
    recon_logits, mu, logvar = output
    x = batch["x"]
    bsz = x.size(0)
    recon = F.binary_cross_entropy_with_logits(recon_logits, x, reduction="sum") / bsz
    mu_d = mu.detach()  # bug
    logvar_d = logvar.detach()  # bug
    kl = -0.5 * torch.sum(1 + logvar_d - mu_d.pow(2) - logvar_d.exp()) / bsz
    total = recon + kl  # bug
    return {"loss": total, "recon": recon, "kl": kl}


def fixed_loss(output, batch):
    recon_logits, mu, logvar = output
    x = batch["x"]
    bsz = x.size(0)
    recon = F.binary_cross_entropy_with_logits(recon_logits, x, reduction="sum") / bsz
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / bsz
    total = recon + kl
    return {"loss": total, "recon": recon, "kl": kl}
