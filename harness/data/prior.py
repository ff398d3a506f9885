"""The prior loss: what a model scores that learned only the targets' frequencies (or, for
regression, their mean) and nothing from the inputs. A collapsed run sits there, below ln K
yet far above what the model can do, so the diagnosis needs the number; computed once, when
the data is built, from each split's targets where they are at hand."""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset, TensorDataset

from harness.data.base import DataMeta, TensorPairs, Tokens, TokenWindows, token_windows

# Counting every token of a large corpus costs a noticeable part of start-up (0.3 s for 11M);
# evenly spaced runs of targets estimate the entropy of a vocabulary of thousands to ~1e-3 nats.
# Runs, not single tokens: a stride over a memmap would touch (read, and keep resident) every
# page of a corpus of billions of tokens.
MAX_COUNTED = 1_000_000
COUNTED_RUNS = 1000
HUBER_BISECTIONS = 60  # halvings of the targets' range: float64 precision


def prior_loss(split: Dataset, meta: DataMeta, indices: torch.Tensor | None = None) -> float | None:
    """Entropy (nats) of the split's targets' distribution for classification and language
    modelling (the cross-entropy of always predicting the frequencies); the targets' variance
    (MSE of always predicting their mean) for regression, or the loss of the best constant under
    its other losses (`meta.loss_function`). None when the targets are not held as one array (a
    user's Dataset without `targets`/`labels` or TensorDataset tensors), since reading them all
    could take long. None too when the loss is the user's (meta.user_loss): its best constant is unknown."""
    targets = _targets(split, indices) if meta.user_loss is None else None
    if targets is None:
        return None
    if meta.task == "regression":
        values = torch.as_tensor(targets, dtype=torch.float64)
        return constant_prediction_loss(values.reshape(len(values), -1), meta.loss_function or "mse")
    return label_entropy(targets, meta.ignore_index)


def constant_prediction_loss(values: torch.Tensor, function: str) -> float:
    """The loss of the best constant per target dimension ([N, D] targets), averaged over dimensions:
    the mean under mse (their variance), the median under l1, a point between the two under huber
    (found by bisection: the mean of the clipped residuals is 0 there), the targets' mean
    probability under bce (its logit)."""
    if function == "mse":
        return float(values.var(dim=0, unbiased=False).mean())
    if function == "l1":
        return float((values - values.median(dim=0).values).abs().mean())
    if function == "huber":
        low, high = values.min(dim=0).values, values.max(dim=0).values
        for _ in range(HUBER_BISECTIONS):
            mid = (low + high) / 2
            above = (values - mid).clamp(-1, 1).mean(dim=0) > 0  # the optimum lies above mid
            low, high = torch.where(above, mid, low), torch.where(above, high, mid)
        return float(F.huber_loss(values, ((low + high) / 2).expand_as(values)))
    p = values.mean(dim=0).clamp(1e-7, 1 - 1e-7)
    return float(-(values * p.log() + (1 - values) * torch.log1p(-p)).mean())


def majority_share(split: Dataset, meta: DataMeta, indices: torch.Tensor | None = None) -> float | None:
    """Share of the most frequent class: the accuracy of a classifier that learned only the
    frequencies (chance accuracy on unbalanced labels). None outside classification."""
    targets = _targets(split, indices) if meta.task == "classification" and meta.user_loss is None else None
    if targets is None:
        return None
    counts = _label_counts(targets, meta.ignore_index)
    return float(counts.max() / counts.sum()) if counts.sum() else None


def label_entropy(labels: np.ndarray | torch.Tensor, ignore_index: int | None = None) -> float | None:
    """Entropy (nats) of the distribution of integer labels: the best loss without the inputs.
    None when every label is the ignore index."""
    counts = _label_counts(labels, ignore_index)
    if not counts.sum():
        return None
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def _label_counts(labels: np.ndarray | torch.Tensor, ignore_index: int | None) -> np.ndarray:
    values = np.asarray(labels).reshape(-1).astype(np.int64)
    return np.bincount(values[values != ignore_index] if ignore_index is not None else values)


def _targets(split: Dataset, indices: torch.Tensor | None) -> np.ndarray | torch.Tensor | None:
    """The targets of the split's samples (those at `indices` when given: the fixed eval sample)."""
    if isinstance(split, TokenWindows):
        if indices is not None:  # every target token of the chosen windows
            return token_windows(split.tokens, indices.numpy() + 1, split.block_size)
        return _spread_targets(split.tokens)
    targets = _target_array(split)
    return targets if targets is None or indices is None else targets[indices.numpy()]


def _spread_targets(tokens: Tokens) -> np.ndarray:
    """Every token but the first is some window's target: all of them, or evenly spaced runs."""
    if len(tokens) - 1 <= MAX_COUNTED:
        return np.asarray(tokens[1:])
    width = MAX_COUNTED // COUNTED_RUNS
    return token_windows(tokens, np.linspace(1, len(tokens) - width, COUNTED_RUNS).astype(np.int64), width)


def _target_array(split: Dataset) -> np.ndarray | torch.Tensor | None:
    if isinstance(split, TensorPairs):
        return split.y
    if isinstance(split, TensorDataset) and len(split.tensors) == 2:
        return split.tensors[1]  # a user's (input, target) tensors
    for attr in ("labels", "targets"):  # image sets that augment on the fly, torchvision's datasets
        labels = getattr(split, attr, None)
        if isinstance(labels, (torch.Tensor, np.ndarray)):
            return labels
    return None
