"""KIND: logprob. A small transformer classifier is trained with F.cross_entropy on its logits (correct) plus an
entropy bonus written (p * torch.log(p)).sum(-1) with p = softmax(logits): the log is unguarded, so once a class
probability underflows to 0 the term is 0 * -inf = NaN and poisons the whole loss."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

VOCAB = 48
SEQ_LEN = 16
N_CLASSES = 4
N_NEUTRAL = 16
N_TOPICAL = 3
ENTROPY_WEIGHT = 0.01


class KeyTokenDataset(Dataset):
    """Neutral filler with a few topical tokens; the class is the topic group they are drawn from."""

    def __init__(self, n, g):
        self.label = torch.randint(0, N_CLASSES, (n,), generator=g)
        self.tokens = torch.randint(0, N_NEUTRAL, (n, SEQ_LEN), generator=g)
        group = (VOCAB - N_NEUTRAL) // N_CLASSES
        for _ in range(N_TOPICAL):
            pos = torch.randint(0, SEQ_LEN, (n,), generator=g)
            topical = N_NEUTRAL + self.label * group + torch.randint(0, group, (n,), generator=g)
            self.tokens[torch.arange(n), pos] = topical

    def __len__(self):
        return len(self.label)

    def __getitem__(self, i):
        return {"tokens": self.tokens[i], "label": self.label[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(51)
    return KeyTokenDataset(n_train, g), KeyTokenDataset(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, d_model=32, n_heads=4, n_layers=2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Parameter(0.02 * torch.randn(SEQ_LEN, d_model))
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, N_CLASSES)

    def forward(self, tokens):
        h = self.encoder(self.tok(tokens) + self.pos)
        return self.head(self.norm(h.mean(dim=1)))


class FixedModel(Model):
    pass


def loss(output, batch):
    ce = F.cross_entropy(output, batch["label"])
    p = F.softmax(output, dim=-1)
    neg_entropy = (p * torch.log(p)).sum(-1).mean()  # bug
    return {"loss": ce + ENTROPY_WEIGHT * neg_entropy, "ce": ce, "entropy": -neg_entropy}


def fixed_loss(output, batch):
    ce = F.cross_entropy(output, batch["label"])
    log_p = F.log_softmax(output, dim=-1)
    neg_entropy = (log_p.exp() * log_p).sum(-1).mean()
    return {"loss": ce + ENTROPY_WEIGHT * neg_entropy, "ce": ce, "entropy": -neg_entropy}
