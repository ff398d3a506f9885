"""Fixed samples of a dataset for the checks: the same ones every time the doctor runs."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from harness.data import Dataset

SAMPLE_SEED = 0


def sample_indices(dataset: Dataset, count: int) -> torch.Tensor:
    """`count` distinct indices spread over the whole dataset (not its first rows, which may be
    unrepresentative); without permuting all of it, which takes seconds for a large corpus."""
    rng = np.random.default_rng(SAMPLE_SEED)
    return torch.from_numpy(rng.choice(len(dataset), size=min(count, len(dataset)), replace=False))


def batches(dataset: Dataset, indices: torch.Tensor, size: int,
            device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    for chunk in indices.split(size):
        x, y = dataset.get(chunk)
        yield x.to(device), y.to(device)
