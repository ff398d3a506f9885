"""What every dataset offers the trainer: random access by a tensor of indices."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch


@dataclass(frozen=True)
class DataMeta:
    """Facts about the data that the model and the loss need."""

    task: str  # "lm" | "classification" | "regression"
    vocab_size: int | None = None  # lm
    block_size: int | None = None  # lm
    in_features: int | None = None  # vector tasks
    out_features: int | None = None  # vector tasks: classes or regression outputs
    optimum_loss: float | None = None  # best achievable loss when known (synthetic)

    @property
    def chance_loss(self) -> float | None:
        """Loss of a uniform prediction: ln(K) for K classes; the doctor and diagnosis use it."""
        k = self.vocab_size if self.task == "lm" else self.out_features
        return float(np.log(k)) if self.task != "regression" and k else None


class Dataset(Protocol):
    def __len__(self) -> int: ...

    def get(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets for the given sample indices (CPU tensors)."""
        ...


class TokenWindows:
    """Every window of block_size+1 consecutive tokens is one sample (nanoGPT's sampling)."""

    def __init__(self, tokens: np.ndarray, block_size: int) -> None:
        if len(tokens) <= block_size + 1:
            raise ValueError(f"only {len(tokens)} tokens, need more than block_size+1={block_size + 1}")
        self.tokens, self.block_size = tokens, block_size
        self._offsets = np.arange(block_size + 1)

    def __len__(self) -> int:
        return len(self.tokens) - self.block_size

    def get(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        rows = self.tokens[idx.numpy()[:, None] + self._offsets]
        window = torch.from_numpy(rows.astype(np.int64))
        return window[:, :-1], window[:, 1:]


class TensorPairs:
    """In-memory (x, y) tensors, for vector tasks."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def get(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[idx], self.y[idx]
