"""KIND: softmax_one. Attention pooling over a GRU's outputs normalises the (B, T, 1) scores with
torch.softmax(scores, dim=-1), the size-1 dimension, so every weight is 1.0 instead of a distribution over T."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

VOCAB = 100
SEQ_LEN = 30
TRIGGERS = (1, 2, 3)


class TriggerDataset(Dataset):
    """Label 1 when one of the trigger tokens occurs anywhere in the sequence."""

    def __init__(self, n, g):
        self.tokens = torch.randint(1, VOCAB, (n, SEQ_LEN), generator=g)
        hit = torch.zeros(n, dtype=torch.bool)
        for t in TRIGGERS:
            hit |= (self.tokens == t).any(dim=1)
        self.labels = hit.long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        return {"tokens": self.tokens[idx], "labels": self.labels[idx]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(4)
    return TriggerDataset(n_train, g), TriggerDataset(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, emb=24, hidden=48, n_classes=2):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.attn = nn.Linear(2 * hidden, 1, bias=False)  # a bias would cancel in the softmax
        self.classifier = nn.Linear(2 * hidden, n_classes)

    def forward(self, tokens):
        h, _ = self.gru(self.embed(tokens))         # (B, T, 2H)
        scores = self.attn(h)                        # (B, T, 1)
        weights = torch.softmax(scores, dim=-1)  # bug
        context = (weights * h).sum(dim=1)           # (B, 2H)
        return self.classifier(context)


class FixedModel(Model):
    def forward(self, tokens):
        h, _ = self.gru(self.embed(tokens))
        scores = self.attn(h)
        weights = torch.softmax(scores, dim=1)       # normalise over the time steps
        context = (weights * h).sum(dim=1)
        return self.classifier(context)


def loss(output, batch):
    return F.cross_entropy(output, batch["labels"])


def fixed_loss(output, batch):
    return F.cross_entropy(output, batch["labels"])
