"""Generated vector tasks whose best achievable loss is known."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from omegaconf import DictConfig

from harness.core.typed_config import Problem, at_least, one_of, read_typed, setting
from harness.data.base import DataMeta, Splits, TensorPairs
from harness.data.holdout import cut_tail, test_size
from harness.data.prior import label_entropy

TASKS = ("classification", "regression")
COUNT = "an integer >= 1"


@dataclass(frozen=True)
class SyntheticConfig:
    """`data=synthetic`'s own keys (conf/data/synthetic.yaml); test_fraction is checked with the
    keys every option shares."""

    task: str = setting("classification", f"one of {list(TASKS)}", one_of(TASKS))
    n_train: int = setting(4096, COUNT, at_least(1))
    n_val: int = setting(1024, COUNT, at_least(1))
    in_features: int = setting(32, COUNT, at_least(1))
    num_classes: int = setting(10, COUNT, at_least(1))
    out_features: int = setting(1, COUNT, at_least(1))
    noise: float = setting(0.1, "a number >= 0", at_least(0))
    seed: int = setting(0, "an integer (the data's own seed)")
    shuffle_labels: bool = setting(False, "true or false")
    sort_by_target: bool = setting(False, "true or false")
    test_fraction: float | None = 0.0

    def problems(self) -> list[Problem]:
        if self.task == "classification" and self.num_classes < 2:
            return [("num_classes", self.num_classes, "an integer >= 2")]
        return []


def validate_synthetic(cfg: DictConfig) -> SyntheticConfig:
    return read_typed(cfg, SyntheticConfig, "data")


def build_synthetic(cfg: SyntheticConfig) -> Splits:
    """A random linear teacher labels Gaussian inputs; fixed by data.seed, not the run seed. The
    test split (data.test_fraction of all samples) is the tail of the n_train ones."""
    g = torch.Generator().manual_seed(cfg.seed)
    n, d = cfg.n_train + cfg.n_val, cfg.in_features
    x = torch.randn(n, d, generator=g)
    if cfg.task == "classification":
        teacher = torch.randn(d, cfg.num_classes, generator=g) / math.sqrt(d)
        y = (x @ teacher).argmax(dim=1)
        meta = DataMeta("classification", in_features=d, out_features=cfg.num_classes, optimum_loss=0.0)
    else:
        teacher = torch.randn(d, cfg.out_features, generator=g) / math.sqrt(d)
        y = x @ teacher + cfg.noise * torch.randn(n, cfg.out_features, generator=g)
        meta = DataMeta("regression", in_features=d, out_features=cfg.out_features, optimum_loss=cfg.noise**2)
    if cfg.shuffle_labels:
        y = y[torch.randperm(n, generator=g)]
        if cfg.task == "classification":  # nothing to learn: the best loss is the labels' entropy
            meta = replace(meta, optimum_loss=label_entropy(y))
    n_test = test_size(cfg.test_fraction, n, cfg.n_val)
    (train_x, test_x), (train_y, test_y) = cut_tail(x[: cfg.n_train], n_test), cut_tail(y[: cfg.n_train], n_test)
    if cfg.sort_by_target:  # stored like a file sorted by its label column
        order = torch.argsort(train_y if train_y.ndim == 1 else train_y[:, 0], stable=True)
        train_x, train_y = train_x[order], train_y[order]
    train = TensorPairs(train_x, train_y)
    val = TensorPairs(x[cfg.n_train :], y[cfg.n_train :])
    return Splits(train, val, meta, TensorPairs(test_x, test_y) if n_test else None)

