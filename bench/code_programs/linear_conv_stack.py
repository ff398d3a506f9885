"""KIND: linear. The bar-crossing CNN runs Conv2d, Conv2d, avg_pool2d, flatten and a Linear head with no activation
anywhere (average pooling and flattening are linear too), so the whole network is one affine map of the pixels:
whether the horizontal and the vertical bar cross depends on where both lie at once, which no single linear read-out
of the image can tell, and accuracy stays near chance."""
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

SIZE = 12
BAR = 5


class Bars(Dataset):
    """One horizontal and one vertical bar of BAR pixels each, added (a crossing pixel holds 2, so both classes have
    the same total ink); label 1 when the bars cross, half the samples of each."""

    def __init__(self, n, g):
        self.y = torch.arange(n) % 2
        self.image = 0.1 * torch.randn(n, 1, SIZE, SIZE, generator=g)
        for i in range(n):
            while True:
                row, col0, col, row0 = torch.randint(0, SIZE - BAR + 1, (4,), generator=g).tolist()
                row += torch.randint(0, BAR, (1,), generator=g).item()
                col += torch.randint(0, BAR, (1,), generator=g).item()
                crosses = col0 <= col < col0 + BAR and row0 <= row < row0 + BAR
                if crosses == bool(self.y[i]):
                    break
            self.image[i, 0, row, col0:col0 + BAR] += 1.0
            self.image[i, 0, row0:row0 + BAR, col] += 1.0

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return {"image": self.image[i], "label": self.y[i]}


def data(n_train: int = 256):
    g = torch.Generator().manual_seed(366)
    return Bars(n_train, g), Bars(max(n_train // 4, 64), g)


class Model(nn.Module):
    def __init__(self, channels=16):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.head = nn.Linear(channels * (SIZE // 2) ** 2, 2)

    def forward(self, image):
        h = self.conv1(image)  # bug
        h = self.conv2(h)  # bug
        h = F.avg_pool2d(h, 2).flatten(1)
        return self.head(h)  # bug


class FixedModel(Model):
    def forward(self, image):
        h = F.relu(self.conv1(image))
        h = F.relu(self.conv2(h))
        h = F.avg_pool2d(h, 2).flatten(1)
        return self.head(h)


def loss(output, batch):
    return F.cross_entropy(output, batch["label"])


def fixed_loss(output, batch):
    return F.cross_entropy(output, batch["label"])
