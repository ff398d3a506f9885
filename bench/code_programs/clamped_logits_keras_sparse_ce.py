"""KIND: clamped_logits. A Keras-style sparse_categorical_crossentropy helper, ported without from_logits, reads
the CNN's raw Linear(…, 10) logits as probabilities: torch.log(torch.clamp(output, 1e-7, 1 - 1e-7)) cuts every
logit outside (0, 1), so those get zero gradient and the target class can never rise above "probability" 1."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

N_CLASSES = 10
SIDE = 8


def _make(n, g, prototypes):
    y = torch.randint(0, N_CLASSES, (n,), generator=g)
    x = prototypes[y] + 0.35 * torch.randn(n, 1, SIDE, SIDE, generator=g)
    return TensorDataset(x, y)


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(81)
    prototypes = (torch.rand(N_CLASSES, 1, SIDE, SIDE, generator=g) > 0.5).float()  # one glyph per class
    return _make(n_train, g, prototypes), _make(max(n_train // 4, 64), g, prototypes)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1, stride=2),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
            nn.Flatten(),
        )
        self.logits = nn.Linear(32 * 2 * 2, N_CLASSES)

    def forward(self, x):
        return self.logits(self.body(x))


class FixedModel(Model):
    pass


def sparse_categorical_crossentropy(y_true, y_pred):
    log_probs = torch.log(torch.clamp(y_pred, 1e-7, 1 - 1e-7))  # bug
    picked = log_probs.gather(1, y_true.unsqueeze(1)).squeeze(1)
    return -picked.mean()


def loss(output, batch):
    _, y = batch
    return sparse_categorical_crossentropy(y, output)


def fixed_loss(output, batch):
    _, y = batch
    return F.cross_entropy(output, y)
