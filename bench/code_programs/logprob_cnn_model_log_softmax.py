"""KIND: logprob. The bar-orientation CNN returns torch.log(torch.softmax(x, dim=-1)) for F.nll_loss: the log of a
softmax that can round a class probability to exactly 0 gives -inf log-probabilities and NaN gradients,
where F.log_softmax computes the same values stably."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

SIZE = 12
N_CLASSES = 4  # horizontal, vertical, diagonal, anti-diagonal bar


def _bar(kind, offset):
    img = torch.zeros(SIZE, SIZE)
    idx = torch.arange(SIZE)
    if kind == 0:
        img[offset, :] = 1.0
    elif kind == 1:
        img[:, offset] = 1.0
    elif kind == 2:
        img[idx, (idx + offset) % SIZE] = 1.0
    else:
        img[idx, (offset - idx) % SIZE] = 1.0
    return img


class Bars(Dataset):
    def __init__(self, n, g):
        self.target = torch.randint(0, N_CLASSES, (n,), generator=g)
        offsets = torch.randint(0, SIZE, (n,), generator=g)
        bars = torch.stack([_bar(int(k), int(o)) for k, o in zip(self.target, offsets)])
        self.image = (bars + 0.25 * torch.randn(n, SIZE, SIZE, generator=g)).unsqueeze(1)

    def __len__(self):
        return len(self.target)

    def __getitem__(self, i):
        return {"image": self.image[i], "target": self.target[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(31)
    return Bars(n_train, g), Bars(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, channels=16):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(2 * channels * (SIZE // 4) ** 2, 64)
        self.classifier = nn.Linear(64, N_CLASSES)

    def features(self, image):
        x = self.pool(F.relu(self.conv1(image)))
        x = self.pool(F.relu(self.conv2(x)))
        return x.flatten(1)

    def forward(self, image):
        x = F.relu(self.fc(self.features(image)))
        x = self.classifier(x)
        return torch.log(torch.softmax(x, dim=-1))  # bug


class FixedModel(Model):
    def forward(self, image):
        x = F.relu(self.fc(self.features(image)))
        x = self.classifier(x)
        return F.log_softmax(x, dim=-1)


def loss(output, batch):
    return F.nll_loss(output, batch["target"])


def fixed_loss(output, batch):
    return F.nll_loss(output, batch["target"])
