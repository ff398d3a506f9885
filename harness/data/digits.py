"""`data=digits`: the 8x8 handwritten digits that ship inside scikit-learn (1797 images, 10 classes).

Real images with no download: the `vision` extra installs scikit-learn, whose wheel carries the
file. Samples are `[1, 8, 8]` float tensors standardised with the training split's pixel mean and
std; the split is fixed (data.seed), so every run seed and every sweep trial sees the same
validation images. `data.shift` moves each training image by up to that many pixels (zero fill),
drawn per sample, so the augmentation is the same with 0 or 8 DataLoader workers.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch.utils.data import Dataset

from harness.core.errors import ConfigError
from harness.core.typed_config import read_typed, setting, within
from harness.data.base import DataMeta, Splits, TensorPairs
from harness.data.holdout import cut_tail, test_size

NUM_CLASSES = 10
SIDE = 8  # pixels per side
MAX_SHIFT = 3  # a digit moved further than 3 of its 8 pixels leaves the frame
INSTALL = 'scikit-learn, from the vision extra: pip install -c constraints-cpu.txt -e ".[vision]"'


class ShiftedDigits(Dataset):
    """Training images moved by a random offset in [-shift, shift] on each axis, drawn per sample
    from torch's default generator (which the loader seeds per sample, epoch and run seed); the
    uncovered border gets the background's value."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, shift: int, background: float) -> None:
        self.images, self.labels, self.shift, self.background = images, labels, shift, background

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.shift
        dy, dx = torch.randint(0, 2 * s + 1, (2,)).tolist()
        padded = F.pad(self.images[index], (s, s, s, s), value=self.background)
        return padded[:, dy:dy + SIDE, dx:dx + SIDE], self.labels[index]


def _load_digits() -> tuple[torch.Tensor, torch.Tensor]:
    from sklearn.datasets import load_digits  # validate_digits made sure it is installed

    bunch = load_digits()
    images = torch.as_tensor(bunch.images, dtype=torch.float32).unsqueeze(1)  # [N, 1, 8, 8], values 0..16
    return images, torch.as_tensor(bunch.target, dtype=torch.long)


@dataclass(frozen=True)
class DigitsConfig:
    """`data=digits`'s own keys (conf/data/digits.yaml); val_fraction and test_fraction are checked
    with the keys every option shares."""

    shift: int = setting(1, f"an integer from 0 (no augmentation) to {MAX_SHIFT} pixels", within(0, MAX_SHIFT))
    seed: int = setting(0, "an integer (it fixes the train/val split)")
    val_fraction: float = 0.2
    test_fraction: float | None = 0.0


def validate_digits(cfg: DictConfig) -> DigitsConfig:
    settings = read_typed(cfg, DigitsConfig, "data")
    if importlib.util.find_spec("sklearn") is None:  # found without importing it
        raise ConfigError("data", "digits", INSTALL)
    return settings


def build_digits(cfg: DigitsConfig) -> Splits:
    images, labels = _load_digits()
    order = torch.randperm(len(images), generator=torch.Generator().manual_seed(cfg.seed))
    n_val = int(len(images) * cfg.val_fraction)
    val_idx = order[:n_val]
    train_idx, test_idx = cut_tail(order[n_val:], test_size(cfg.test_fraction, len(images), n_val, unit="images"))
    mean, std = images[train_idx].mean(), images[train_idx].std()
    images = (images - mean) / std
    train_x, train_y = images[train_idx], labels[train_idx]
    background = float(-mean / std)  # a raw 0 pixel, standardised
    train = ShiftedDigits(train_x, train_y, cfg.shift, background) if cfg.shift else TensorPairs(train_x, train_y)
    meta = DataMeta("classification", in_features=SIDE * SIDE, out_features=NUM_CLASSES, input_shape=(1, SIDE, SIDE))
    test = TensorPairs(images[test_idx], labels[test_idx]) if len(test_idx) else None
    return Splits(train, TensorPairs(images[val_idx], labels[val_idx]), meta, test)
