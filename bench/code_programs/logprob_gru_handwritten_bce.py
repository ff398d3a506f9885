"""KIND: logprob. A GRU flags sensor windows whose drift ends positive; its forward ends in torch.sigmoid and the
objective hand-writes binary cross-entropy as -(y * p.log() + (1 - y) * (1 - p).log()) with no epsilon or clamp,
so a confident output that rounds p to 0 or 1 makes the loss inf and the gradient NaN."""
import torch
from torch import nn
from torch.utils.data import TensorDataset

SEQ_LEN = 20
N_CHANNELS = 3


def _make(n, g):
    steps = torch.randn(n, SEQ_LEN, N_CHANNELS, generator=g)
    drift = steps[:, :, 0].cumsum(dim=1)[:, -1]        # channel 0 is a random walk
    y = (drift > 0).float()
    return TensorDataset(steps, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(41)
    return _make(n_train, g), _make(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.gru = nn.GRU(N_CHANNELS, hidden, num_layers=1, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        _, h_n = self.gru(x)
        return torch.sigmoid(self.head(h_n[-1])).squeeze(-1)  # bug


class FixedModel(Model):
    pass


EPS = 1e-7


def loss(output, batch):
    _, y = batch
    p = output
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()  # bug


def fixed_loss(output, batch):
    _, y = batch
    p = output.clamp(EPS, 1 - EPS)
    return -(y * p.log() + (1 - y) * (1 - p).log()).mean()
