"""Generated vector tasks whose best achievable loss is known."""
from __future__ import annotations

import math
from dataclasses import replace

import torch
from omegaconf import DictConfig

from harness.data.base import DataMeta, Splits, TensorPairs
from harness.data.holdout import cut_tail, test_size
from harness.data.prior import label_entropy
from harness.core.errors import ConfigError

TASKS = ("classification", "regression")


def validate_synthetic(cfg: DictConfig) -> None:
    if cfg.get("task") not in TASKS:
        raise ConfigError("data.task", cfg.get("task"), f"one of {list(TASKS)}")
    for key in ("n_train", "n_val", "in_features", "num_classes", "out_features"):
        value = cfg.get(key)
        if not isinstance(value, int) or value < 1:
            raise ConfigError(f"data.{key}", value, "an integer >= 1")
    if cfg.task == "classification" and cfg.num_classes < 2:
        raise ConfigError("data.num_classes", cfg.num_classes, "an integer >= 2")
    for key in ("shuffle_labels", "sort_by_target"):
        if not isinstance(cfg.get(key, False), bool):
            raise ConfigError(f"data.{key}", cfg.get(key), "true or false")
    if float(cfg.noise) < 0:
        raise ConfigError("data.noise", cfg.noise, "a number >= 0")


def build_synthetic(cfg: DictConfig) -> Splits:
    """A random linear teacher labels Gaussian inputs; fixed by data.seed, not the run seed. The
    test split (data.test_fraction of all samples) is the tail of the n_train ones."""
    g = torch.Generator().manual_seed(int(cfg.seed))
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
    if cfg.get("shuffle_labels", False):
        y = y[torch.randperm(n, generator=g)]
        if cfg.task == "classification":  # nothing to learn: the best loss is the labels' entropy
            meta = replace(meta, optimum_loss=label_entropy(y))
    n_test = test_size(cfg, n, cfg.n_val)
    (train_x, test_x), (train_y, test_y) = cut_tail(x[: cfg.n_train], n_test), cut_tail(y[: cfg.n_train], n_test)
    if cfg.get("sort_by_target", False):  # stored like a file sorted by its label column
        order = torch.argsort(train_y if train_y.ndim == 1 else train_y[:, 0], stable=True)
        train_x, train_y = train_x[order], train_y[order]
    train = TensorPairs(train_x, train_y)
    val = TensorPairs(x[cfg.n_train :], y[cfg.n_train :])
    return Splits(train, val, meta, TensorPairs(test_x, test_y) if n_test else None)

