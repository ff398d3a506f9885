"""KIND: logits_activation. A multi-label LSTM tags which sensor channels contain a burst, but its forward returns
F.relu(self.head(h)) into F.binary_cross_entropy_with_logits: every negative logit is cut to 0, so no tag can be
predicted below probability 0.5 and the absent tags' gradients vanish wherever the ReLU cuts."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

SEQ_LEN = 32
N_CHANNELS = 5


class Bursts(Dataset):
    def __init__(self, n, g):
        self.labels = (torch.rand(n, N_CHANNELS, generator=g) < 0.35).float()
        signal = 0.5 * torch.randn(n, SEQ_LEN, N_CHANNELS, generator=g)
        start = torch.randint(0, SEQ_LEN - 4, (n, N_CHANNELS), generator=g)
        t = torch.arange(SEQ_LEN)[None, :, None]
        in_burst = (t >= start[:, None, :]) & (t < start[:, None, :] + 4)
        self.signal = signal + 2.0 * in_burst.float() * self.labels[:, None, :]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"signal": self.signal[i], "labels": self.labels[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(71)
    return Bursts(n_train, g), Bursts(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=48):
        super().__init__()
        self.lstm = nn.LSTM(N_CHANNELS, hidden, num_layers=2, batch_first=True, dropout=0.1)
        self.head = nn.Linear(hidden, N_CHANNELS)

    def encode(self, signal):
        out, _ = self.lstm(signal)
        return out.max(dim=1).values  # max-pool over time

    def forward(self, signal):
        h = self.encode(signal)
        return F.relu(self.head(h))  # bug


class FixedModel(Model):
    def forward(self, signal):
        h = self.encode(signal)
        return self.head(h)


def loss(output, batch):
    return F.binary_cross_entropy_with_logits(output, batch["labels"])


def fixed_loss(output, batch):
    return F.binary_cross_entropy_with_logits(output, batch["labels"])
