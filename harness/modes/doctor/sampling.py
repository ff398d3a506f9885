"""Fixed samples of a dataset for the checks: the same ones every time the doctor runs."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Dataset

from harness.data.checks import spread_indices
from harness.data.batch import to_device
from harness.data.loader import fetch
from harness.assembly.assemble import Assembly


def sample_indices(dataset: Dataset, count: int) -> torch.Tensor:
    return spread_indices(len(dataset), count)


def read(built: Assembly, dataset: Dataset, indices: torch.Tensor) -> tuple[Any, torch.Tensor | None]:
    """The samples at `indices`, collated as training would collate them (on the CPU): (input,
    target), or (the whole batch, None) for the user's objective."""
    return fetch(dataset, built.recipe, indices)


def batches(built: Assembly, indices: torch.Tensor) -> Iterator[tuple[Any, torch.Tensor | None]]:
    """Training samples in micro-batches, on the run's device, with their sample counts."""
    for chunk in indices.split(built.micro_batch):
        x, y = read(built, built.train_set, chunk)
        yield to_device(x, built.device), to_device(y, built.device)
