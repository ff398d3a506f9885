"""Facts about the data that no curve can show, measured once when the run is built and written to
summary.json for the diagnosis: how many validation samples also sit in the training split, and
the scale of the inputs the model first sees."""
from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from harness.data.checks import spread_indices
from harness.data.loader import BatchRecipe, fetch

# Hashing reads samples: the training split is hashed up to this many samples (all of it for the
# datasets the suite and tests use; a spread subset of a larger one, whose overlap is then
# extrapolated), the validation split checked on up to VAL_CHECKED. Reads go CHUNK at a time.
TRAIN_HASHED = 50_000
VAL_CHECKED = 2048
CHUNK = 1024
STATS_SAMPLES = 256


def _digests(dataset: Dataset, recipe: BatchRecipe, indices: torch.Tensor, split: str) -> list[bytes]:
    """An 8-byte digest of each sample's input: equal inputs, equal digests (labels left out: a
    validation image that is also a training image leaks whatever its label says)."""
    out = []
    for chunk in indices.split(CHUNK):
        x, _ = fetch(dataset, recipe, chunk, split=split)
        rows = x.reshape(len(chunk), -1).contiguous().numpy()
        out += [hashlib.blake2b(row.tobytes(), digest_size=8).digest() for row in rows]
    return out


def split_overlap(train: Dataset, val: Dataset, recipe: BatchRecipe, task: str) -> dict[str, Any] | None:
    """How many checked validation samples have an exact copy (same input) in the training split.
    `share` estimates the overlap of the whole validation split: found / checked, scaled up by the
    part of the training split that was hashed. None for language modelling: a window of a token
    stream is no sample of its own, and short windows repeat in any corpus (indentation, licence
    headers): duplicated documents must be found before the text is split."""
    if task == "lm":
        return None
    hashed = spread_indices(len(train), TRAIN_HASHED)
    seen = set(_digests(train, recipe, hashed, "train"))
    checked = spread_indices(len(val), VAL_CHECKED, seed=1)
    found = sum(d in seen for d in _digests(val, recipe, checked, "val"))
    coverage = len(hashed) / len(train)
    return {"val_checked": len(checked), "val_in_train": found, "train_hashed": len(hashed),
            "train_samples": len(train), "share": min(1.0, found / len(checked) / coverage)}


def input_stats(train: Dataset, recipe: BatchRecipe) -> dict[str, float] | None:
    """Scale of real-valued inputs over a spread sample: the largest |median| and robust std
    (1.4826 x MAD) of any input feature, and the root mean square. Medians, so that a few corrupt
    samples (outlier_samples' business) do not make the whole split look unscaled. None for token
    ids and other integer inputs."""
    x, _ = fetch(train, recipe, spread_indices(len(train), STATS_SAMPLES, seed=2))
    if not x.is_floating_point() or x.dim() < 2 or len(x) < 2:
        return None
    flat = x.reshape(len(x), -1).double().numpy()
    flat = flat[np.isfinite(flat).all(axis=1)]
    if len(flat) < 2:
        return None
    median = np.median(flat, axis=0)
    spread = 1.4826 * np.median(np.abs(flat - median), axis=0)
    return {"max_abs_feature_median": float(np.abs(median).max()), "max_feature_spread": float(spread.max()),
            "rms": float(math.sqrt(np.mean(flat ** 2)))}
