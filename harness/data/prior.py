"""The prior loss: what a model scores that learned only the targets' frequencies (or, for
regression, their mean) and nothing from the inputs. A collapsed run sits there, below ln K
yet far above what the model can do, so the diagnosis needs the number; computed once, when
the data is built, from the training targets where they are at hand."""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from harness.data.base import DataMeta, TensorPairs, TokenWindows

# Counting every token of a large corpus costs a noticeable part of start-up (0.3 s for 11M);
# evenly spaced targets estimate the entropy of a vocabulary of thousands to ~1e-3 nats.
MAX_COUNTED = 1_000_000


def prior_loss(train: Dataset, meta: DataMeta) -> float | None:
    """Entropy (nats) of the training targets' distribution for classification and language
    modelling (the cross-entropy of always predicting the frequencies); the targets' variance
    (MSE of always predicting their mean) for regression. None when the targets are not held
    as one array (a user's Dataset), since reading them all could take long."""
    targets = _targets(train)
    if targets is None:
        return None
    if meta.task == "regression":
        values = torch.as_tensor(targets, dtype=torch.float64)
        return float(values.reshape(len(values), -1).var(dim=0, unbiased=False).mean())
    return label_entropy(targets)


def label_entropy(labels: np.ndarray | torch.Tensor) -> float:
    """Entropy (nats) of the distribution of integer labels: the best loss without the inputs."""
    counts = np.bincount(np.asarray(labels).reshape(-1).astype(np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def _targets(train: Dataset) -> np.ndarray | torch.Tensor | None:
    if isinstance(train, TokenWindows):
        stride = max(1, (len(train.tokens) - 1) // MAX_COUNTED)
        return np.asarray(train.tokens[1::stride])  # every token but the first is some window's target
    if isinstance(train, TensorPairs):
        return train.y
    labels = getattr(train, "labels", None)  # image sets that augment on the fly keep their labels whole
    return labels if isinstance(labels, (torch.Tensor, np.ndarray)) else None
