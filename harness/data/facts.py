"""Facts about the data that no curve can show, measured once when the run is built and written to
summary.json for the diagnosis: how many validation samples also sit in the training split, which
training inputs (or regression targets) are far out of line with the rest, and the scale of the
inputs the model first sees."""
from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from harness.data.batch import tensors
from harness.data.checks import spread_indices
from harness.data.loader import BatchRecipe, fetch
from harness.data.standardize import TargetScale

# Hashing reads samples: the training split is hashed up to this many samples (all of it for the
# datasets the suite and tests use; a spread subset of a larger one, whose overlap is then
# extrapolated), the validation split checked on up to VAL_CHECKED. Reads go CHUNK at a time.
TRAIN_HASHED = 50_000
VAL_CHECKED = 2048
CHUNK = 1024
STATS_SAMPLES = 256


OUTLIER_NORM_RATIO = 10.0  # an input this many times the median input norm (or not finite) stands out
OUTLIERS_LISTED = 8
TUKEY_FAR = 3.0  # a regression target this many interquartile ranges past its quartiles stands out


def _read_inputs(dataset: Dataset, recipe: BatchRecipe, indices: torch.Tensor, split: str) -> SplitRead:
    """An 8-byte digest of each sample's input (equal inputs, equal digests; labels left out: a
    validation image that is also a training image leaks whatever its label says) and, for
    real-valued inputs and targets, each sample's rows of them; class labels, for a classifier's
    one label per sample."""
    digests, norms, targets, labels = [], [], [], []
    for chunk in indices.split(CHUNK):
        x, y = fetch(dataset, recipe, chunk, split=split)
        rows = x.reshape(len(chunk), -1).contiguous()
        digests += [hashlib.blake2b(row.tobytes(), digest_size=8).digest() for row in rows.numpy()]
        if rows.is_floating_point():
            norms.append(rows.double().norm(dim=1).numpy())
        if isinstance(y, torch.Tensor) and len(y) == len(chunk):
            if y.is_floating_point():
                targets.append(y.reshape(len(chunk), -1).double().numpy())
            elif y.dim() == 1:
                labels.append(y.numpy())
    chunks = len(indices.split(CHUNK))
    return SplitRead(digests, np.concatenate(norms) if norms else None,
                     np.concatenate(targets) if len(targets) == chunks else None,
                     np.concatenate(labels) if len(labels) == chunks else None)


@dataclass(frozen=True)
class SplitRead:
    """What one read of a split's sampled inputs yields (None where the data has no such part)."""
    digests: list[bytes]
    norms: np.ndarray | None
    targets: np.ndarray | None
    labels: np.ndarray | None


def split_facts(train: Dataset, val: Dataset, recipe: BatchRecipe, task: str,
                target_scale: TargetScale | None = None) -> dict[str, Any]:
    """One read of each split for `split_overlap`, `input_outliers` and `split_contrast` (all None
    for language modelling: a window of a token stream is no sample of its own, and short windows
    repeat in any corpus, so duplicated documents must be found before the text is split). The
    target facts are of what the model must output: standard units under `target_scale`."""
    if task == "lm":
        return {"split_overlap": None, "input_outliers": None, "target_outliers": None, "target_percentiles": None,
                "target_rows_off_one": None, "split_contrast": None}
    hashed = spread_indices(len(train), TRAIN_HASHED)
    seen = _read_inputs(train, recipe, hashed, "train")
    checked = spread_indices(len(val), VAL_CHECKED, seed=1)
    val_read = _read_inputs(val, recipe, checked, "val")
    targets = seen.targets
    regression = task == "regression"
    if target_scale is not None and targets is not None:
        targets = target_scale(torch.from_numpy(targets).reshape(-1, *target_scale.mean.shape))
        targets = targets.reshape(len(hashed), -1).double().numpy()
    return {"split_overlap": _overlap(set(seen.digests), len(hashed), len(train), val_read.digests),
            "input_outliers": _outliers(hashed, seen.norms),
            "target_outliers": _target_outliers(hashed, targets) if regression else None,
            "target_percentiles": _percentiles(targets) if regression else None,
            "target_rows_off_one": _rows_off_one(targets) if regression else None,
            "split_contrast": _contrast(seen, val_read)}


def _contrast(train: SplitRead, val: SplitRead) -> dict[str, Any]:
    """How the sampled training and validation splits differ where a split-specific preprocessing
    mistake shows: the classes each holds (labels scaled, cast or filtered on one split only
    leave the training split one class, or the validation split classes training never saw), the
    spread of the regression targets (constant targets teach nothing), and the inputs' typical
    norm (pixels scaled on one split only differ 255x)."""
    out: dict[str, Any] = {"train_classes": None, "val_classes": None, "val_share_unseen": None,
                           "train_target_spread": None, "val_over_train_input_norm": None}
    if train.labels is not None and val.labels is not None and len(train.labels) and len(val.labels):
        train_classes = set(np.unique(train.labels).tolist())
        out.update(train_classes=len(train_classes), val_classes=len(np.unique(val.labels)),
                   val_share_unseen=float(np.mean(~np.isin(val.labels, list(train_classes)))),
                   train_class_values=sorted(train_classes)[:OUTLIERS_LISTED])
    if train.targets is not None and np.isfinite(train.targets).any():
        out["train_target_spread"] = float(np.nanstd(np.where(np.isfinite(train.targets), train.targets, np.nan)))
    typical = [np.median(n[np.isfinite(n)]) if n is not None and np.isfinite(n).any() else None
               for n in (train.norms, val.norms)]
    if typical[0] and typical[1] is not None:
        out["val_over_train_input_norm"] = float(typical[1] / typical[0])
    return out


def _rows_off_one(targets: np.ndarray | None) -> float | None:
    """The share of the (finite) target rows of several values that do not sum to 1: targets a
    softmax output, whose values always do, cannot reach. None for one value per sample."""
    if targets is None or targets.ndim < 2 or targets.shape[1] < 2:
        return None
    rows = targets[np.isfinite(targets).all(axis=1)]
    return float(np.mean(np.abs(rows.sum(axis=1) - 1.0) > 1e-4)) if len(rows) else None


def _percentiles(targets: np.ndarray | None) -> list[float] | None:
    """The 0th to 100th percentiles of every finite regression target value (all dimensions pooled):
    what share of the targets an output activation's range can reach."""
    if targets is None or not np.isfinite(targets).any():
        return None
    return [float(v) for v in np.percentile(targets[np.isfinite(targets)], np.arange(101))]


def _target_outliers(indices: torch.Tensor, targets: np.ndarray | None) -> dict[str, Any] | None:
    """Regression targets beyond Tukey's far-out fences (3 interquartile ranges past the quartiles,
    in any target dimension) or not finite: a column stored in the wrong unit for some rows, where
    the inputs look normal. Fences, not a multiple of the median deviation: a target that is a
    steep function of its input (x^4) has a long natural tail inside them (a normal target
    passes them once in ~200,000 samples)."""
    if targets is None or not np.isfinite(targets).all(axis=1).any():
        return None
    finite = np.isfinite(targets).all(axis=1)
    q1, q3 = np.percentile(targets[finite], [25, 75], axis=0)
    iqr = q3 - q1
    spread = iqr > 0  # a constant dimension has no fences
    low, high = q1 - TUKEY_FAR * iqr, q3 + TUKEY_FAR * iqr
    outside = np.nan_to_num(np.maximum(low - targets, targets - high) / np.where(spread, iqr, 1.0), nan=np.inf)
    past = np.where(spread, outside, -np.inf).max(axis=1)  # IQRs past the nearer fence, per sample
    outlying = ~finite | (past > 0)
    worst = np.argsort(-past)[:min(OUTLIERS_LISTED, int(outlying.sum()))]
    return {"checked": len(targets), "count": int(outlying.sum()), "quartiles": [float(q1.min()), float(q3.max())],
            "samples": [{"index": int(indices[i]), "target": float(targets[i].flat[int(np.argmax(np.abs(targets[i] -
                                                                                                   (q1 + q3) / 2)))])}
                        for i in worst]}


def _overlap(seen: set[bytes], hashed: int, train_samples: int, val_digests: list[bytes]) -> dict[str, Any]:
    """How many checked validation samples have an exact copy (same input) in the training split.
    `share` estimates the overlap of the whole validation split: found / checked, scaled up by the
    part of the training split that was hashed."""
    found = sum(d in seen for d in val_digests)
    return {"val_checked": len(val_digests), "val_in_train": found, "train_hashed": hashed,
            "train_samples": train_samples, "share": min(1.0, found / len(val_digests) / (hashed / train_samples))}


def _outliers(indices: torch.Tensor, norms: np.ndarray | None) -> dict[str, Any] | None:
    """Training samples whose input norm is over OUTLIER_NORM_RATIO x the median, or not finite:
    how many, and the largest (dataset index and norm). A corrupt record or a column in the
    wrong unit dominates every batch that holds it; the median is what a typical sample is."""
    if norms is None or not np.isfinite(norms).any():
        return None
    median = float(np.median(norms[np.isfinite(norms)]))
    if median <= 0:
        return None
    outlying = ~np.isfinite(norms) | (norms > OUTLIER_NORM_RATIO * median)
    worst = np.argsort(-np.nan_to_num(norms, nan=np.inf))[:min(OUTLIERS_LISTED, int(outlying.sum()))]
    return {"checked": len(norms), "count": int(outlying.sum()), "median_norm": median,
            "samples": [{"index": int(indices[i]), "input_norm": float(norms[i])} for i in worst]}


def input_stats(train: Dataset, recipe: BatchRecipe,
                model_inputs: Callable[[Any], Any] | None = None) -> dict[str, float] | None:
    """Scale of real-valued inputs over a spread sample: the largest |median| and robust std
    (1.4826 x MAD) of any input feature, and the root mean square. Medians, so that a few corrupt
    samples (outlier_samples' business) do not make the whole split look unscaled. None for token
    ids and other integer inputs. A batch the user's objective reads whole is measured where the
    model reads it: the first floating-point tensor `model_inputs` (what the forward is given) holds."""
    x, _ = fetch(train, recipe, spread_indices(len(train), STATS_SAMPLES, seed=2))
    if model_inputs is not None:
        x = next((t for t in tensors(model_inputs(x)) if t.is_floating_point()), None)
    if x is None or not x.is_floating_point() or x.dim() < 2 or len(x) < 2:
        return None
    flat = x.reshape(len(x), -1).double().numpy()
    flat = flat[np.isfinite(flat).all(axis=1)]
    if len(flat) < 2:
        return None
    median = np.median(flat, axis=0)
    spread = 1.4826 * np.median(np.abs(flat - median), axis=0)
    return {"max_abs_feature_median": float(np.abs(median).max()), "max_feature_spread": float(spread.max()),
            "rms": float(math.sqrt(np.mean(flat ** 2)))}
