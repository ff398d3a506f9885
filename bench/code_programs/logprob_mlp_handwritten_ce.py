"""KIND: logprob. The tabular classifier's objective hand-writes a label-smoothed cross-entropy as
-(onehot * torch.log(F.softmax(logits, dim=1))), with nothing guarding the log: as soon as one class
probability underflows to 0 the loss is inf and its gradient NaN (F.log_softmax is the stable form)."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

N_FEATURES = 20
N_CLASSES = 5
SMOOTHING = 0.1


class Clusters(Dataset):
    """Gaussian blobs around one centre per class, with a few uninformative columns."""

    def __init__(self, n, g, centers):
        self.label = torch.randint(0, N_CLASSES, (n,), generator=g)
        self.features = centers[self.label] + torch.randn(n, N_FEATURES, generator=g)

    def __len__(self):
        return len(self.label)

    def __getitem__(self, i):
        return {"features": self.features[i], "label": self.label[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(21)
    centers = 1.5 * torch.randn(N_CLASSES, N_FEATURES, generator=g)
    centers[:, 15:] = 0.0
    return Clusters(n_train, g, centers), Clusters(max(n_train // 4, 64), g, centers)


class Model(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(N_FEATURES, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, N_CLASSES)
        self.drop = nn.Dropout(0.1)

    def forward(self, features):
        h = F.gelu(self.fc1(features))
        h = self.drop(F.gelu(self.fc2(h)))
        return self.out(h)


class FixedModel(Model):
    pass


def smoothed_onehot(label):
    onehot = F.one_hot(label, N_CLASSES).float()
    return onehot * (1.0 - SMOOTHING) + SMOOTHING / N_CLASSES


def loss(output, batch):
    target = smoothed_onehot(batch["label"])
    return -(target * torch.log(F.softmax(output, dim=1))).sum(1).mean()  # bug


def fixed_loss(output, batch):
    target = smoothed_onehot(batch["label"])
    return -(target * F.log_softmax(output, dim=1)).sum(1).mean()
