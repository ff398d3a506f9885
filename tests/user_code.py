"""Models and datasets written the way a user writes them (no harness imports), for the bring-your-own tests."""
from __future__ import annotations

import json
import os
import random
from collections import namedtuple

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import Dataset, IterableDataset, TensorDataset, get_worker_info

from harness.loop.callbacks.base import Callback


class LSTMNet(nn.Module):
    """A character LSTM; records the keyword arguments it was built with when RECORD_KWARGS names a file."""

    def __init__(self, vocab_size: int, hidden: int = 32, n_layer: int = 1) -> None:
        super().__init__()
        if os.environ.get("RECORD_KWARGS"):
            with open(os.environ["RECORD_KWARGS"], "w") as f:
                json.dump({"vocab_size": vocab_size, "hidden": hidden, "n_layer": n_layer}, f)
        self.emb = nn.Embedding(vocab_size, hidden)
        self.lstm = nn.LSTM(hidden, hidden, num_layers=n_layer, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(self.emb(x))
        return self.head(h)


class Classifier(nn.Module):
    """A vector classifier whose output format is chosen: tensor, tuple, dict, namedtuple."""

    Out = namedtuple("Out", ["scores", "features"])

    def __init__(self, in_features: int, num_classes: int, returns: str = "tensor", hidden: int = 32) -> None:
        super().__init__()
        self.returns = returns
        self.body = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor):
        h = self.body(x.flatten(1))
        logits = self.head(h)
        if self.returns == "tuple":
            return logits, h
        if self.returns == "dict":
            return {"logits": logits, "hidden": h}
        if self.returns == "two_fields":
            return {"scores": logits, "hidden": h}
        if self.returns == "wrong_width":
            return logits[:, :-1]
        if self.returns == "ints":
            return logits.argmax(-1)
        return logits


class Exploding(nn.Module):
    def __init__(self, in_features: int) -> None:
        super().__init__()
        raise ValueError(f"cannot build for {in_features} features")


class BrokenForward(nn.Module):
    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.head = nn.Linear(in_features + 1, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)


def not_a_module(in_features: int):
    return "a string"


class Blobs(Dataset):
    """Gaussian blobs, one per class, as dict samples of numpy arrays; `noise` adds a random
    augmentation drawn from the global numpy and torch RNGs in __getitem__, as users write it."""

    def __init__(self, n: int, seed: int, num_classes: int = 4, features: int = 16, noise: float = 0.0,
                 fail_at: int | None = None) -> None:
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, num_classes, (n,), generator=g)
        centres = torch.randn(num_classes, features, generator=torch.Generator().manual_seed(123)) * 2
        self.x = centres[self.y] + torch.randn(n, features, generator=g)
        self.classes = [f"c{i}" for i in range(num_classes)]
        self.noise, self.fail_at = noise, fail_at

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> dict:
        if self.fail_at is not None and i == self.fail_at and get_worker_info() is not None:
            raise OSError(f"corrupt record {i}")  # only in a DataLoader worker, past the pre-flight read
        x = self.x[i].numpy().astype(np.float64)  # float64, as numpy makes it
        if self.noise:
            x = x + self.noise * np.random.randn(*x.shape) + self.noise * torch.randn(x.shape).numpy()
            x = x * (1 + 0.01 * random.random())
        return {"features": x, "label": int(self.y[i])}


def blobs(n_train: int = 512, noise: float = 0.0, fail_at: int | None = None):
    return Blobs(n_train, 0, noise=noise, fail_at=fail_at), Blobs(128, 1, noise=noise)


def pairs(n_train: int = 256):
    """(input, target) tuples in a TensorDataset: num_classes is read from its labels."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n_train + 64, 8, generator=g)
    y = (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long()
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


def pairs_with_test(n_train: int = 256, as_dict: bool = False):
    """`pairs` plus a test split of other samples, which mode=eval scores: (train, val, test) or a dict."""
    train, val = pairs(n_train)
    x = torch.randn(96, 8, generator=torch.Generator().manual_seed(1))
    test = TensorDataset(x, (x[:, 0] > 0).long() + 2 * (x[:, 1] > 0).long())
    return {"train": train, "val": val, "test": test} if as_dict else (train, val, test)


def scalar_targets(n_train: int = 512):
    """Regression with one float per sample (targets shaped [B]), noise-free: the optimum MSE is 0."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n_train + 128, 8, generator=g)
    y = x @ torch.linspace(-1, 1, 8)
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


def bad_labels():
    x = torch.randn(64, 8)
    return TensorDataset(x, torch.arange(64) % 7), TensorDataset(x, torch.arange(64) % 7)


def float_labels():
    x = torch.randn(64, 8)
    return TensorDataset(x, torch.rand(64)), TensorDataset(x, torch.rand(64))


class Stream(IterableDataset):
    def __iter__(self):
        yield torch.zeros(8), 0


def streaming():
    return Stream(), Stream()


def one_dataset():
    return pairs()[0]


def no_class_count():
    train, val = blobs()
    del train.classes
    return train, val


def raising_factory(root: str = "/nonexistent"):
    raise FileNotFoundError(f"no data under {root}")


class FrequenciesOnly(nn.Module):
    """A language model that never looks at its input: all it can learn is how often each token occurs."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.logits = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.logits.expand(*x.shape, -1)


class WithSpareHead(nn.Module):
    """A classifier that builds a second head and never calls it (a leftover of an experiment)."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_features, 32), nn.ReLU(), nn.Linear(32, num_classes))
        self.spare_head = nn.Linear(32, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def blobs_with_nan_rows(n_train: int = 512, rows: tuple[int, ...] = (7, 300)):
    """`blobs` whose training rows `rows` hold a NaN feature (a corrupt record)."""
    train, val = blobs(n_train)
    for i in rows:
        train.x[i, 0] = float("nan")
    return train, val


class PaddedSequences(Dataset):
    """Language-model samples of different lengths, padded to one width with -100 targets (the
    way tokenised, right-padded corpora arrive): the next token is (token + 1) mod vocab.
    Samples whose index lies in `empty` are padding only."""

    vocab_size = 12

    def __init__(self, n: int, seed: int, width: int = 16, empty: tuple[int, ...] = ()) -> None:
        g = torch.Generator().manual_seed(seed)
        start = torch.randint(0, self.vocab_size, (n, 1), generator=g)
        self.x = (start + torch.arange(width)) % self.vocab_size
        self.y = (self.x + 1) % self.vocab_size
        lengths = torch.randint(2, width + 1, (n,), generator=g)
        lengths[list(empty)] = 0
        self.y[torch.arange(width) >= lengths[:, None]] = -100

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def padded_sequences(n_train: int = 256, empty: tuple[int, ...] = ()):
    return PaddedSequences(n_train, 0, empty=empty), PaddedSequences(64, 1)


def labels_with_unlabeled(n_train: int = 256, unlabeled: float = 0.3):
    """`pairs` where a share of the samples carry -100 for "no label" (semi-supervised data)."""
    train, val = pairs(n_train)
    for split in (train, val):
        y = split.tensors[1]
        y[torch.rand(len(y), generator=torch.Generator().manual_seed(len(y))) < unlabeled] = -100
    return train, val


class Bottleneck(nn.Module):
    """A classifier squeezed through two units between wide layers."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.encode = nn.Sequential(nn.Linear(in_features, 64), nn.ReLU(), nn.Linear(64, 2))
        self.decode = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x.flatten(1)))


def raw_columns(n_train: int = 512):
    """Tabular data as it comes from a CSV: each column in its own units (tens of thousands, with
    offsets of hundreds of thousands, beside a column of tenths); the class follows a linear rule on
    the standardised values, so a model on standardised inputs learns it easily. The scale is far
    past where a model could learn through it: at a tenth of it, whether Adam's 300 updates learn
    the rule anyway depended on the CPU's rounding (docs/testing.md)."""
    g = torch.Generator().manual_seed(0)
    z = torch.randn(n_train + 128, 6, generator=g)
    y = (z @ torch.tensor([1.0, -1.0, 0.5, 0.0, 0.8, -0.3]) > 0).long()
    scale = torch.tensor([10000.0, 30000.0, 0.1, 500.0, 2000.0, 50000.0])
    offset = torch.tensor([50000.0, 200000.0, 0.0, 1000.0, 10000.0, 500000.0])
    x = z * scale + offset
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


def multi_label(n_train: int = 512):
    """Five independent yes/no labels per sample (float 0/1 targets, multi-label as BCE reads them),
    each a linear rule of the inputs."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n_train + 128, 8, generator=g)
    y = (x @ torch.randn(8, 5, generator=g) > 0).float()
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


class Regressor(nn.Module):
    """A plain MLP regressor, its output layer as torch initialises it."""

    def __init__(self, in_features: int, out_features: int, hidden: int = 64) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def tagger(n_train: int = 512, n_val: int = 201):
    """A multi-label tagger's data: five yes/no labels per sample, each a linear rule with a bias, so
    the labels are imbalanced and macro F1 differs from accuracy; an odd validation split."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n_train + n_val, 8, generator=g)
    y = (x @ torch.randn(8, 5, generator=g) > 0.6).float()
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


class Tagger(Regressor):
    """The tagger's model where no data facts reach it (your own objective on a task-less dataset)."""

    def __init__(self, in_features: int = 8, out_features: int = 5) -> None:
        super().__init__(in_features, out_features)


def tag_loss(output: torch.Tensor, batch: list) -> torch.Tensor:
    """A user's own objective for the tagger: BCE on the logits."""
    return F.binary_cross_entropy_with_logits(output, batch[1])


def tag_pick(output: torch.Tensor, batch: list) -> tuple[torch.Tensor, torch.Tensor]:
    """What a metric is fed under the user's objective: the logits and the 0/1 labels."""
    return output, batch[1].long()


def label_agreement(output: torch.Tensor, batch: list) -> torch.Tensor:
    """A function metric: the batch's share of labels whose logit is on the side of its target (a mean)."""
    return ((output > 0) == (batch[1] > 0.5)).float().mean()


def positives_found(output: torch.Tensor, batch: list) -> dict[str, torch.Tensor]:
    """A function metric as a sum and a count: recall over every positive label of the split."""
    positive = batch[1] > 0.5
    return {"sum": ((output > 0) & positive).sum(), "count": positive.sum()}


def prices(n_train: int = 512):
    """Regression in the units a user's table has: prices around 200,000 with a spread of 50,000, a
    linear function of standardised features plus a little noise."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n_train + 128, 6, generator=g)
    y = 200_000 + 50_000 * (x @ torch.tensor([0.6, -0.4, 0.3, 0.0, 0.5, -0.2]) + 0.05 * torch.randn(len(x), generator=g))
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


def labels_scaled_with_pixels(n_train: int = 512):
    """A user's preprocessing slip: the training pixels *and labels* divided by 255 (the integer
    labels become class 0), the validation split left raw (pixels 0-255, labels 0-9)."""
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 10, (n_train + 128,), generator=g)
    x = (torch.rand(n_train + 128, 16, generator=g) * 64 + y[:, None] * 16).clamp(max=255)
    return (TensorDataset(x[:n_train] / 255, (y[:n_train] / 255).long()),
            TensorDataset(x[n_train:], y[n_train:]))


# ---- your own objective (loss._target_): models, datasets and objectives as a user writes them


class TinyVAE(nn.Module):
    """A VAE whose output is a dict; its sampling draws from torch's RNG (resume must restore it)."""

    def __init__(self, in_features: int, latent: int = 4, hidden: int = 32) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Flatten(), nn.Linear(in_features, hidden), nn.ReLU())
        self.mu, self.logvar = nn.Linear(hidden, latent), nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, in_features))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return {"recon": self.dec(z), "mu": mu, "logvar": logvar}


def vae_loss(output: dict, batch: list, beta: float = 1.0, delay: float = 0.0) -> dict[str, torch.Tensor]:
    """Reconstruction + beta x KL, both logged; `delay` slows each call (for tests that kill a run)."""
    if delay:
        import time

        time.sleep(delay)
    x = batch[0].flatten(1)
    recon = (output["recon"] - x).pow(2).sum(1).mean()
    kl = (-0.5 * (1 + output["logvar"] - output["mu"].pow(2) - output["logvar"].exp()).sum(1)).mean()
    return {"loss": recon + beta * kl, "recon": recon, "kl": kl}


def masked_mse_sum(output: torch.Tensor, batch: dict) -> dict[str, torch.Tensor]:
    """A token-level loss: summed over the unmasked elements, with their count, so that an
    accumulated update is the mean over every counted element of the big batch."""
    mask = batch["mask"]
    error = (output - batch["y"]).pow(2) * mask
    return {"loss": error.sum(), "count": mask.sum()}


def masked_mse_with_parts(output: torch.Tensor, batch: dict, mean_part: bool = False) -> dict[str, torch.Tensor]:
    """masked_mse_sum with a part: the absolute error summed over the same count (as the contract
    says), or, with `mean_part`, the share of elements within 0.5 returned as a mean (a slip)."""
    mask = batch["mask"]
    error = (output - batch["y"]) * mask
    parts = {"loss": error.pow(2).sum(), "count": mask.sum(), "abs_error": error.abs().sum()}
    if mean_part:
        parts["close"] = ((error.abs() < 0.5) & (mask > 0)).sum() / mask.sum()
    return parts


def masked_mse_mean(output: torch.Tensor, batch: dict) -> torch.Tensor:
    mask = batch["mask"]
    return ((output - batch["y"]).pow(2) * mask).sum() / mask.sum().clamp(min=1)


class MaskedSequences(Dataset):
    """Dict samples whose number of counted elements varies a lot from sample to sample."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, 8, generator=g)
        self.y = self.x @ torch.randn(8, 6, generator=torch.Generator().manual_seed(0))
        lengths = torch.randint(1, 7, (n,), generator=g)
        self.mask = (torch.arange(6) < lengths[:, None]).float()

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "y": self.y[i], "mask": self.mask[i]}


def masked_sequences() -> tuple[Dataset, Dataset, Dataset]:
    return MaskedSequences(512, 1), MaskedSequences(100, 2), MaskedSequences(60, 3)


class MaskedRegressor(nn.Module):
    """`forward(x)`: given the dict batch's `x` by keyword (its other fields are the objective's)."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, width), nn.Tanh(), nn.Linear(width, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class PairEncoder(nn.Module):
    """`forward(a, b)`: a two-view sample reaches it whole."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 4)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net(a), self.net(b)


class LossReturning(nn.Module):
    """Computes its own loss, HF-style, with an auxiliary loss beside it."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(8, 6)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, mask: torch.Tensor | None = None) -> dict:
        out = self.net(x)
        result = {"logits": out, "aux_loss": out.pow(2).mean().detach()}
        if y is not None:
            result["loss"] = (out - y).pow(2).mean()
        return result


# objectives that cannot train: each is refused in one line before training
def bad_vector(output, batch):
    return (output["recon"] - batch[0].flatten(1)).pow(2)


def bad_number(output, batch):
    return 3.0


def bad_no_loss(output, batch):
    return {"recon": output["recon"].pow(2).mean()}


def bad_detached(output, batch):
    return output["recon"].detach().pow(2).mean()


def bad_one_arg(output):
    return output["recon"].mean()


class ViewPairs(Dataset):
    """Two noisy views of points around 6 centres in 8 dimensions."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        centres = torch.randn(6, 8, generator=torch.Generator().manual_seed(0)) * 2
        self.points = centres[torch.randint(0, 6, (n,), generator=g)] + 0.3 * torch.randn(n, 8, generator=g)

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        p = self.points[i]
        return p + 0.2 * torch.randn_like(p), p + 0.2 * torch.randn_like(p)


def view_pairs() -> tuple[Dataset, Dataset]:
    return ViewPairs(1024, 1), ViewPairs(256, 2)


class PairProjector(nn.Module):
    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, dim))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.net(a), self.net(b)


def views_agree(output: tuple, batch: tuple) -> torch.Tensor:
    """Only pulls each pair together: nothing keeps different inputs apart."""
    a, b = (nn.functional.normalize(z, dim=1) for z in output)
    return (a - b).pow(2).sum(1).mean()


def views_contrast(output: tuple, batch: tuple) -> torch.Tensor:
    a, b = (nn.functional.normalize(z, dim=1) for z in output)
    logits = a @ b.T / 0.2
    return nn.functional.cross_entropy(logits, torch.arange(len(a)))


def negative_agreement(output: tuple, batch: tuple) -> torch.Tensor:
    """A loss that is negative throughout: minus the views' cosine similarity."""
    a, b = (nn.functional.normalize(z, dim=1) for z in output)
    return -(a * b).sum(1).mean()


class TwoHeads(nn.Module):
    """Digits: a class head and a head for the image's mean intensity, on one shared trunk."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Flatten(), nn.Linear(in_features, 64), nn.Tanh())
        self.digit, self.ink = nn.Linear(64, num_classes), nn.Linear(64, 1)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        h = self.trunk(x)
        return {"digit": self.digit(h), "ink": self.ink(h).squeeze(1)}


def digit_and_ink(output: dict, batch: list, ink_weight: float = 1.0) -> dict[str, torch.Tensor]:
    x, y = batch
    digit = nn.functional.cross_entropy(output["digit"], y)
    ink = (output["ink"] - x.flatten(1).mean(1)).pow(2).mean()
    return {"loss": digit + ink_weight * ink, "digit": digit, "ink": ink}


class ConfiguredNet(nn.Module):
    """Built from a config object, as Hugging Face models are: `config` arrives built, not a dict."""

    def __init__(self, in_features: int, num_classes: int, config: object) -> None:
        super().__init__()
        assert not isinstance(config, dict), "config arrived as a plain dict"
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(in_features, config.width), nn.ReLU(),
                                 nn.Linear(config.width, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class BatchScores(nn.Module):
    """Scores each sample against every sample of its batch: [B, B] logits, which fit a task with
    as many classes as the batch holds only while batches are full."""

    def __init__(self, in_features: int) -> None:
        super().__init__()
        self.proj = nn.Linear(in_features, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.proj(x)
        return z @ z.T


def tiny_bert(vocab_size: int, num_classes: int, block_size: int = 16):
    """A Hugging Face sequence classifier built from a config (nothing downloaded); the data's
    vocab_size, num_classes and block_size reach it by name."""
    from transformers import BertConfig, BertForSequenceClassification

    return BertForSequenceClassification(BertConfig(vocab_size=vocab_size, hidden_size=32, num_hidden_layers=1,
                                                    num_attention_heads=2, intermediate_size=64,
                                                    max_position_embeddings=block_size, num_labels=num_classes))


class BagOfTokens(nn.Module):
    """A classifier of token ids (padding id 0 left out of the mean)."""

    def __init__(self, vocab_size: int, num_classes: int) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(vocab_size, 32, mode="mean", padding_idx=0)
        self.head = nn.Linear(32, num_classes)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(input_ids))


class Watcher(Callback):
    """Records the checkpoints it is told of and the failure it sees; raises at `fail_at`."""
    saved: list[int] = []
    errors: list[str] = []

    def __init__(self, fail_at: int = 0) -> None:
        self.fail_at = fail_at

    def on_step_end(self, trainer, tick, result):
        if tick.step == self.fail_at:
            raise RuntimeError("a sensor failed")
        return None

    def on_checkpoint_saved(self, trainer, step: int) -> None:
        Watcher.saved.append(step)

    def on_error(self, trainer, error: BaseException) -> None:
        Watcher.errors.append(f"{type(error).__name__}: {error}")


def focal_loss(output: torch.Tensor, batch: list, gamma: float = 2.0) -> torch.Tensor:
    """A user's classification objective on (input, label) pairs: the focal loss."""
    ce = F.cross_entropy(output, batch[1], reduction="none")
    return ((1 - (-ce).exp()) ** gamma * ce).mean()
