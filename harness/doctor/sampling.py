"""Fixed samples of a dataset for the checks: the same ones every time the doctor runs."""
from __future__ import annotations

from collections.abc import Iterator

import torch

from harness.data import Dataset

SAMPLE_SEED = 0


def sample_indices(dataset: Dataset, count: int) -> torch.Tensor:
    """`count` distinct indices spread over the whole dataset (not its first rows, which may be unrepresentative)."""
    g = torch.Generator().manual_seed(SAMPLE_SEED)
    return torch.randperm(len(dataset), generator=g)[: min(count, len(dataset))]


def batches(dataset: Dataset, indices: torch.Tensor, size: int,
            device: torch.device) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    for chunk in indices.split(size):
        x, y = dataset.get(chunk)
        yield x.to(device), y.to(device)
