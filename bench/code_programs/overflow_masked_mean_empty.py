"""KIND: overflow. Masked mean pooling divides the summed embeddings by the number of real tokens; some reviews
are empty (all padding), so the division is 0 / 0 and those samples' logits, and the loss, are NaN."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

PAD = 0
VOCAB = 80
MAX_LEN = 16


class PaddedReviews(Dataset):
    def __init__(self, n, g):
        lengths = torch.randint(1, MAX_LEN + 1, (n,), generator=g)
        lengths[torch.arange(n) % 9 == 4] = 0  # reviews whose text was empty after cleaning
        tokens = torch.randint(1, VOCAB, (n, MAX_LEN), generator=g)
        positive = tokens < VOCAB // 2
        keep = torch.arange(MAX_LEN)[None, :] < lengths[:, None]
        self.tokens = torch.where(keep, tokens, torch.full_like(tokens, PAD))
        votes = (positive & keep).sum(1) * 2 - keep.sum(1)
        self.labels = (votes > 0).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"tokens": self.tokens[i], "label": self.labels[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(17)
    return PaddedReviews(n_train, g), PaddedReviews(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim, padding_idx=PAD)
        self.fc = nn.Sequential(nn.Linear(dim, 32), nn.ReLU(), nn.Linear(32, 2))

    def forward(self, tokens):
        mask = (tokens != PAD).unsqueeze(-1).float()    # (B, T, 1)
        summed = (self.emb(tokens) * mask).sum(dim=1)   # (B, D)
        lengths = mask.sum(dim=1)                        # (B, 1); 0 for an empty review
        pooled = summed / lengths  # bug
        return self.fc(pooled)


class FixedModel(Model):
    def forward(self, tokens):
        mask = (tokens != PAD).unsqueeze(-1).float()
        summed = (self.emb(tokens) * mask).sum(dim=1)
        lengths = mask.sum(dim=1).clamp(min=1.0)
        pooled = summed / lengths
        return self.fc(pooled)


def loss(output, batch):
    return F.cross_entropy(output, batch["label"])


def fixed_loss(output, batch):
    return F.cross_entropy(output, batch["label"])
