"""KIND: zero_grad. The objective floors the predicted remaining useful life to whole cycles with
torch.floor before the L1 loss; floor has zero gradient everywhere, so the LSTM never learns."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset

STEPS = 30
N_SENSORS = 4


class EngineRuns(Dataset):
    def __init__(self, n, g, drift):
        rul = torch.randint(0, 21, (n,), generator=g).float()
        t = torch.arange(STEPS, dtype=torch.float32) / STEPS
        wear = (1.0 - rul / 20.0)[:, None] * t  # engines close to failure degrade faster
        x = wear[:, :, None] * drift + 0.05 * torch.randn(n, STEPS, N_SENSORS, generator=g)
        self.series, self.rul = x, rul

    def __len__(self):
        return len(self.rul)

    def __getitem__(self, i):
        return {"series": self.series[i], "rul": self.rul[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(14)
    drift = 0.5 + torch.rand(1, 1, N_SENSORS, generator=g)  # per-sensor sensitivity to wear
    return EngineRuns(n_train, g, drift), EngineRuns(max(n_train // 4, 64), g, drift)


class Model(nn.Module):
    def __init__(self, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(N_SENSORS, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, series):
        out, _ = self.lstm(series)
        return 10.0 + self.out(out[:, -1])  # (B, 1), in cycles


class FixedModel(Model):
    pass


def loss(output, batch):
    pred = output.squeeze(-1)
    cycles = torch.floor(pred)  # bug
    return F.l1_loss(cycles, batch["rul"])


def fixed_loss(output, batch):
    cycles = output.squeeze(-1)
    return F.l1_loss(cycles, batch["rul"])
