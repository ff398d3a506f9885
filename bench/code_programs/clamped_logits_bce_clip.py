"""KIND: clamped_logits. The click-through model returns the raw output of its last nn.Linear (a logit), but the
objective clips it with output.clamp(1e-6, 1 - 1e-6) and hands it to F.binary_cross_entropy as a probability:
every logit outside (0, 1) is flattened to the bound and gets zero gradient."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

N_FIELDS = 4
CARDINALITY = 8


class Impressions(Dataset):
    """Categorical fields (user segment, ad, site, hour bucket); clicks follow a hidden logistic model."""

    def __init__(self, n, g, field_weights):
        self.fields = torch.randint(0, CARDINALITY, (n, N_FIELDS), generator=g)
        score = field_weights.gather(1, self.fields.T).sum(0) - 0.5
        self.clicked = (torch.rand(n, generator=g) < torch.sigmoid(score)).float()

    def __len__(self):
        return len(self.clicked)

    def __getitem__(self, i):
        return {"fields": self.fields[i], "clicked": self.clicked[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(91)
    field_weights = 1.5 * torch.randn(N_FIELDS, CARDINALITY, generator=g)
    return Impressions(n_train, g, field_weights), Impressions(max(n_train // 4, 64), g, field_weights)


class Model(nn.Module):
    def __init__(self, emb=8, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(N_FIELDS * CARDINALITY, emb)
        self.register_buffer("offsets", torch.arange(N_FIELDS) * CARDINALITY)
        self.mlp = nn.Sequential(nn.Linear(N_FIELDS * emb, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, fields):
        e = self.embed(fields + self.offsets).flatten(1)
        return self.mlp(e).squeeze(-1)


class FixedModel(Model):
    pass


def loss(output, batch):
    p = output.clamp(1e-6, 1 - 1e-6)  # bug
    return F.binary_cross_entropy(p, batch["clicked"])  # bug


def fixed_loss(output, batch):
    return F.binary_cross_entropy_with_logits(output, batch["clicked"])
