"""Models and data for bench/pathology_suite.py, written the way a user writes them: plain torch,
no harness imports, reached through `model._target_=bench.suite_models.X` / `data._target_=...`."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU}


class Net(nn.Module):
    """A plain feed-forward classifier or regressor: `depth` hidden Linear + activation layers."""

    def __init__(self, in_features: int, num_classes: int | None = None, out_features: int | None = None,
                 hidden: int = 64, depth: int = 2, act: str = "relu") -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), ACTIVATIONS[act]()]
            width = hidden
        layers.append(nn.Linear(width, num_classes or out_features or 1))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.flatten(1))


class SpareHeadNet(Net):
    """A classifier that builds a second head for an experiment and never calls it."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64) -> None:
        super().__init__(in_features, num_classes, hidden=hidden)
        self.aux_head = nn.Linear(hidden, num_classes)


class DetachedBranchNet(nn.Module):
    """A two-branch classifier whose second branch is detached by mistake: it shapes the output but
    never learns."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64) -> None:
        super().__init__()
        self.main = nn.Sequential(nn.Linear(in_features, hidden), nn.GELU())
        self.side = nn.Sequential(nn.Linear(in_features, hidden), nn.GELU())
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.main(x) + self.side(x).detach())


class CharRNN(nn.Module):
    """A character language model on torch's recurrent layers; `spare=True` also builds a
    projection it never uses."""

    CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}

    def __init__(self, vocab_size: int, hidden: int = 64, cell: str = "lstm", spare: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.rnn = self.CELLS[cell](hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)
        self.spare = nn.Linear(hidden, hidden) if spare else None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(idx))
        return self.head(out)


class PositionOnlyLM(nn.Module):
    """A language model whose forward reads only the positions of its tokens, never their ids (the
    bug of a transform that zeroes the inputs): all it can learn is how often each token occurs."""

    def __init__(self, vocab_size: int, block_size: int, hidden: int = 64) -> None:
        super().__init__()
        self.positions = nn.Embedding(block_size, hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, vocab_size))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device).expand_as(idx)
        return self.mlp(self.positions(pos))


class InputBlindNet(Net):
    """A classifier whose inputs are multiplied by a mask that a bug left at zero."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.flatten(1) * 0)


def skewed_blobs(n_train: int = 4096, n_val: int = 1024, classes: int = 8, features: int = 16, seed: int = 0):
    """Gaussian blobs with unbalanced classes (each twice as common as the next, from the eighth on
    as common as the eighth, so that every class shows up in both splits): the prior loss, the
    entropy of the class frequencies, sits well below ln K."""
    g = torch.Generator().manual_seed(seed)
    weights = 2.0 ** -torch.arange(classes, dtype=torch.float64).clamp(max=7)
    centres = torch.randn(classes, features, generator=g) * 1.5

    def draw(n: int) -> TensorDataset:
        y = torch.multinomial(weights, n, replacement=True, generator=g)
        return TensorDataset(centres[y] + torch.randn(n, features, generator=g), y)

    return draw(n_train), draw(n_val)


class FunctionalNet(nn.Module):
    """A feed-forward net whose activation is a function call in `forward` (`torch.relu(...)`),
    not a module: nothing in `model.modules()` says what the activation is."""

    FUNCTIONS = {"relu": torch.relu, "tanh": torch.tanh, "gelu": nn.functional.gelu}

    def __init__(self, in_features: int, num_classes: int | None = None, out_features: int | None = None,
                 hidden: int = 64, depth: int = 2, act: str = "relu") -> None:
        super().__init__()
        sizes = [in_features] + [hidden] * depth
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
        self.head = nn.Linear(hidden, num_classes or out_features or 1)
        self.act = self.FUNCTIONS[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for layer in self.hidden:
            x = self.act(layer(x))
        return self.head(x)


class BottleneckNet(nn.Module):
    """A classifier squeezed through `bottleneck` units: with many classes it cannot separate them
    all, however long it trains."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64, bottleneck: int = 2) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, bottleneck),
                                    nn.Linear(bottleneck, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.flatten(1))


class FrozenBodyNet(Net):
    """A classifier whose hidden layers were frozen by a fine-tuning recipe applied by mistake:
    only the output layer trains."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64, depth: int = 2,
                 act: str = "relu") -> None:
        super().__init__(in_features, num_classes, hidden=hidden, depth=depth, act=act)
        for layer in list(self.layers)[:-1]:
            layer.requires_grad_(False)


class FrozenCharRNN(CharRNN):
    """A character language model whose embedding and recurrent layer never train."""

    def __init__(self, vocab_size: int, hidden: int = 64, cell: str = "lstm") -> None:
        super().__init__(vocab_size, hidden, cell)
        self.embed.requires_grad_(False)
        self.rnn.requires_grad_(False)


def _teacher_blobs(n: int, classes: int, features: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Gaussian inputs labelled by a random linear teacher (a learnable task with a clean optimum)."""
    x = torch.randn(n, features, generator=g)
    teacher = torch.randn(features, classes, generator=torch.Generator().manual_seed(1234))
    return x, (x @ teacher).argmax(1)


def raw_feature_blobs(n_train: int = 4096, n_val: int = 1024, classes: int = 10, features: int = 32,
                      scale: float = 100.0, offset: float = 50.0, seed: int = 0):
    """The teacher task with its features left in raw units (a column in grams, another in metres):
    each feature has its own scale up to `scale` and an offset, nothing standardised them."""
    g = torch.Generator().manual_seed(seed)
    units = scale ** torch.rand(features, generator=g)
    shift = offset * torch.randn(features, generator=g)

    def draw(n: int) -> TensorDataset:
        x, y = _teacher_blobs(n, classes, features, g)
        return TensorDataset(x * units + shift, y)

    return draw(n_train), draw(n_val)


def blobs_with_outliers(n_train: int = 4096, n_val: int = 1024, classes: int = 10, features: int = 32,
                        share: float = 0.02, scale: float = 1e3, seed: int = 0):
    """The teacher task where `share` of the training samples are corrupt: their features were
    stored `scale` times too large (a unit mix-up in a few rows of the file)."""
    g = torch.Generator().manual_seed(seed)
    x, y = _teacher_blobs(n_train, classes, features, g)
    bad = torch.randperm(n_train, generator=g)[: max(1, round(share * n_train))]
    x[bad] *= scale
    return TensorDataset(x, y), TensorDataset(*_teacher_blobs(n_val, classes, features, g))


def leaky_blobs(n_train: int = 512, n_val: int = 256, classes: int = 10, features: int = 32,
                leaked: float = 1.0, label_noise: float = 0.3, seed: int = 0):
    """A small noisy task whose validation split was drawn from the training rows (a split made
    after deduplication went wrong): `leaked` of the val samples are copies of training samples."""
    g = torch.Generator().manual_seed(seed)
    x, y = _teacher_blobs(n_train + n_val, classes, features, g)
    noisy = torch.rand(len(y), generator=g) < label_noise
    y[noisy] = torch.randint(classes, (int(noisy.sum()),), generator=g)
    train_x, train_y = x[:n_train], y[:n_train]
    copies = round(leaked * n_val)
    picks = torch.randperm(n_train, generator=g)[:copies]
    val_x = torch.cat([train_x[picks], x[n_train + copies:]])
    val_y = torch.cat([train_y[picks], y[n_train + copies:]])
    return TensorDataset(train_x, train_y), TensorDataset(val_x, val_y)


def digits_with_bright_images(share: float = 0.01, scale: float = 50.0, seed: int = 3):
    """scikit-learn's 8x8 digits as [1, 8, 8] images in [0, 1]; `share` of the training images were
    stored `scale` times too bright (a batch of scans read in another unit)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = torch.tensor(digits.images / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target)
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(y), generator=g)
    train, val = order[:1400], order[1400:]
    train_x = x[train].clone()
    bad = torch.randperm(len(train), generator=g)[: max(1, round(share * len(train)))]
    train_x[bad] *= scale
    return TensorDataset(train_x, y[train]), TensorDataset(x[val], y[val])


def digits_prepared_apart(slip: str = "labels", seed: int = 4):
    """scikit-learn's 8x8 digits as 0-255 pixel images, preprocessed differently per split by one
    of the slips users make: `labels` (the training pixels and labels divided by 255, so every
    training label is class 0), `pixels` (only the training pixels scaled to [0, 1]) or `filtered`
    (a filter that kept digits 0-4 in training, while validation holds all ten)."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = torch.tensor(digits.images * 255 / 16.0, dtype=torch.float32).unsqueeze(1)
    y = torch.tensor(digits.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    train, val = order[:1400], order[1400:]
    train_x, train_y = x[train], y[train]
    if slip == "labels":
        train_x, train_y = train_x / 255, (train_y / 255).long()
    elif slip == "pixels":
        train_x = train_x / 255
    elif slip == "filtered":
        kept = train_y < 5
        train_x, train_y = train_x[kept], train_y[kept]
    else:
        raise ValueError(f"slip={slip!r}: one of labels, pixels, filtered")
    return TensorDataset(train_x, train_y), TensorDataset(x[val], y[val])


def regression_with_bad_targets(share: float = 0.01, scale: float = 1000.0, seed: int = 5):
    """A smooth regression on 20 standardised features; `share` of the training targets were stored
    `scale` times too large (a column in the wrong unit for some rows); the inputs look normal."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6000, 20, generator=g)
    w = torch.randn(20, generator=g) / 20 ** 0.5
    y = torch.tanh(x @ w) + 0.3 * torch.sin(2 * x[:, 0]) + 0.05 * torch.randn(6000, generator=g)
    train_y = y[:5000].clone()
    bad = torch.randperm(5000, generator=g)[: max(1, round(share * 5000))]
    train_y[bad] *= scale
    return TensorDataset(x[:5000], train_y.unsqueeze(1)), TensorDataset(x[5000:], y[5000:].unsqueeze(1))


# ---- the user's own objective (loss._target_): a VAE and a two-view contrastive model


class GaussianVAE(nn.Module):
    """A VAE on flat inputs: `decoder_depth` hidden layers decode the latent (a strong decoder
    needs the latent less)."""

    def __init__(self, in_features: int, latent: int = 8, hidden: int = 64, decoder_depth: int = 1) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU(),
                                     nn.Linear(hidden, 2 * latent))
        layers: list[nn.Module] = []
        width = latent
        for _ in range(decoder_depth):
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        self.decoder = nn.Sequential(*layers, nn.Linear(width, in_features))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        mu, logvar = self.encoder(x).chunk(2, dim=1)
        sample = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu)
        return {"x_hat": self.decoder(sample), "mu": mu, "logvar": logvar}


def elbo(output: dict, batch: list, beta: float = 1.0) -> dict[str, torch.Tensor]:
    """Squared error summed over pixels + beta x KL(q(z|x) || N(0, I)), per sample."""
    target = batch[0].flatten(1)
    mu, logvar = output["mu"], output["logvar"]
    reconstruction = F.mse_loss(output["x_hat"], target, reduction="none").sum(dim=1).mean()
    kl = 0.5 * (mu.pow(2) + logvar.exp() - 1.0 - logvar).sum(dim=1).mean()
    return {"loss": reconstruction + beta * kl, "reconstruction": reconstruction, "kl": kl}


class ClusterViews(torch.utils.data.Dataset):
    """Two noisy views of points drawn around `clusters` centres in `features` dimensions."""

    def __init__(self, n: int, clusters: int, features: int, noise: float, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        centres = torch.randn(clusters, features, generator=torch.Generator().manual_seed(0))
        self.points = centres[torch.randint(0, clusters, (n,), generator=g)] + 0.3 * torch.randn(n, features,
                                                                                               generator=g)
        self.noise = noise

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        point = self.points[i]
        return point + self.noise * torch.randn_like(point), point + self.noise * torch.randn_like(point)


def cluster_views(clusters: int = 8, features: int = 32, noise: float = 0.3, seed: int = 0):
    return (ClusterViews(2048, clusters, features, noise, seed + 1),
            ClusterViews(512, clusters, features, noise, seed + 2))


class Siamese(nn.Module):
    """One encoder and projector applied to both views: `forward(first, second)`."""

    def __init__(self, features: int = 32, hidden: int = 64, dim: int = 16) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                  nn.Linear(hidden, dim))

    def forward(self, first: torch.Tensor, second: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.body(first), self.body(second)


def nt_xent(output: tuple, batch: tuple, temperature: float = 0.2) -> torch.Tensor:
    """Each view picks its partner among the batch's other views (negatives push embeddings apart)."""
    first, second = (F.normalize(z, dim=1) for z in output)
    scores = first @ second.T / temperature
    partner = torch.arange(len(first), device=first.device)
    return 0.5 * (F.cross_entropy(scores, partner) + F.cross_entropy(scores.T, partner))


def alignment_only(output: tuple, batch: tuple) -> torch.Tensor:
    """The two views' squared distance alone: no term keeps different inputs apart."""
    first, second = (F.normalize(z, dim=1) for z in output)
    return (first - second).pow(2).sum(dim=1).mean()


class SharedTrunk(nn.Module):
    """Digits: one trunk, a class head and a head that predicts each image row's mean intensity."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.Tanh(),
                                   nn.Linear(hidden, hidden), nn.Tanh())
        self.classes = nn.Linear(hidden, num_classes)
        self.rows = nn.Linear(hidden, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        shared = self.trunk(x)
        return self.classes(shared), self.rows(shared)


def two_tasks(output: tuple, batch: list, rows_weight: float = 1.0) -> dict[str, torch.Tensor]:
    """Cross-entropy of the class head + rows_weight x the row-profile head's squared error."""
    images, labels = batch
    classes = F.cross_entropy(output[0], labels)
    rows = F.mse_loss(output[1], images.reshape(len(images), 8, 8).mean(dim=2))
    return {"loss": classes + rows_weight * rows, "classes": classes, "rows": rows}
