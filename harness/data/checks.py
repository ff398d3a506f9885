"""Before training (and before mode=eval scores a test split), a sample of each split is read and
checked against what the data declares, so a label past num_classes or a token id past vocab_size
fails in one line, not as a CUDA device-side assert an hour in."""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from harness.data.base import DataMeta
from harness.data.loader import BatchRecipe, fetch
from harness.core.errors import ConfigError

CHECKED_SAMPLES = 256  # per split: cheap even at ~1 ms a sample, and enough to see a bad encoding


def spread_indices(num_samples: int, count: int, seed: int = 0) -> torch.Tensor:
    """`count` distinct indices spread over the whole dataset (not its first rows, which may be
    unrepresentative); without permuting all of it, which takes seconds for a large corpus."""
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.choice(num_samples, size=min(count, num_samples), replace=False))


def _ids_in_range(t: torch.Tensor, size: int, key: str, split: str, what: str, ignore_index: int | None = None) -> None:
    if t.is_floating_point() or t.is_complex():
        raise ConfigError("data.task", "lm" if what == "token id" else "classification",
                          f"integer {what}s; the {split} {what}s are {str(t.dtype).removeprefix('torch.')} "
                          f"(use data.task=regression for real-valued targets)")
    if ignore_index is not None:
        t = t[t != ignore_index]
        if not len(t):
            raise ConfigError("loss.ignore_index", ignore_index,
                              f"a value some {split} targets differ from: all {CHECKED_SAMPLES} sampled {split} "
                              f"samples have only ignored targets, so nothing would be learned or measured")
    low, high = int(t.min()), int(t.max())
    if low < 0 or high >= size:
        allowed = f"[0, {size})" + (f" or loss.ignore_index ({ignore_index})" if ignore_index is not None else "")
        raise ConfigError(key, size, f"more than every {what}: sampled {split} {what}s span [{low}, {high}]; "
                                     f"the model gets {size} outputs, so each must lie in {allowed}")


def check_samples(splits: dict[str, Dataset], meta: DataMeta, recipe: BatchRecipe) -> None:
    for split, dataset in splits.items():
        if len(dataset) == 0:
            raise ConfigError("data", split, "a non-empty split: it has no samples")
        x, y = fetch(dataset, recipe, spread_indices(len(dataset), CHECKED_SAMPLES), split=split)
        if meta.task == "lm":
            _ids_in_range(x, meta.vocab_size, "data.vocab_size", split, "token id")
            _ids_in_range(y, meta.vocab_size, "data.vocab_size", split, "token id", meta.ignore_index)
        elif meta.task == "classification":
            _ids_in_range(y, meta.out_features, "data.num_classes", split, "label", meta.ignore_index)
        elif not y.is_floating_point() or not torch.isfinite(y).all():
            raise ConfigError("data.task", "regression", f"finite real-valued targets; sampled {split} targets are "
                                                         f"{str(y.dtype).removeprefix('torch.')} or not finite")
        elif meta.loss_function == "bce" and ((y < 0).any() or (y > 1).any()):
            raise ConfigError("loss.function", "bce", f"targets in [0, 1] (labels or probabilities); sampled {split} "
                                                      f"targets span [{float(y.min()):.4g}, {float(y.max()):.4g}]")
