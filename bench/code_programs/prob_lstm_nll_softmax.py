"""KIND: probabilities. The LSTM review classifier returns F.softmax probabilities, and F.nll_loss is given
them directly, although it expects log-probabilities (log_softmax)."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

VOCAB = 60
SEQ_LEN = 24
N_CLASSES = 3


class ReviewDataset(Dataset):
    def __init__(self, n, g):
        self.labels = torch.randint(0, N_CLASSES, (n,), generator=g)
        bucket_size = (VOCAB - 1) // N_CLASSES
        uniform = torch.randint(1, VOCAB, (n, SEQ_LEN), generator=g)
        topical = 1 + self.labels[:, None] * bucket_size + torch.randint(0, bucket_size, (n, SEQ_LEN), generator=g)
        pick = torch.rand(n, SEQ_LEN, generator=g) < 0.4
        self.tokens = torch.where(pick, topical, uniform)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"tokens": self.tokens[i], "label": self.labels[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(2)
    return ReviewDataset(n_train, g), ReviewDataset(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, emb_dim=32, hidden=64):
        super().__init__()
        self.embedding = nn.Embedding(VOCAB, emb_dim, padding_idx=0)
        self.lstm = nn.LSTM(emb_dim, hidden, batch_first=True)
        self.fc = nn.Linear(hidden, N_CLASSES)

    def forward(self, tokens):
        embedded = self.embedding(tokens)
        _, (h_n, _) = self.lstm(embedded)
        logits = self.fc(h_n[-1])
        return F.softmax(logits, dim=-1)  # bug


class FixedModel(Model):
    def forward(self, tokens):
        embedded = self.embedding(tokens)
        _, (h_n, _) = self.lstm(embedded)
        logits = self.fc(h_n[-1])
        return F.log_softmax(logits, dim=-1)


def loss(output, batch):
    return F.nll_loss(output, batch["label"])  # bug


def fixed_loss(output, batch):
    return F.nll_loss(output, batch["label"])
