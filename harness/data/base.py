"""What every data option hands the trainer: map-style datasets and the facts the model needs."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Union

import numpy as np
import torch
from torch.utils.data import Dataset

from harness.data.token_file import TokenFile

TASKS = ("lm", "classification", "regression")
NO_TASK = "none"  # data=custom data.task=null: batches of any structure, for the user's own objective
SPLITS = ("train", "val", "test")  # in the order builders and caches list them
# What a model's constructor may ask for by name; the data decides these.
MODEL_FIELDS = ("vocab_size", "block_size", "in_features", "out_features", "num_classes", "input_shape")


@dataclass(frozen=True)
class DataMeta:
    """Facts about the data that the model and the loss need."""

    task: str  # "lm" | "classification" | "regression" | "none" (NO_TASK)
    vocab_size: int | None = None  # lm
    block_size: int | None = None  # lm
    in_features: int | None = None  # vector and image tasks: elements per input sample
    out_features: int | None = None  # classification: classes; regression: outputs
    optimum_loss: float | None = None  # best achievable loss when known (synthetic)
    input_shape: tuple[int, ...] | None = None  # one input sample's shape, e.g. (1, 8, 8)
    tokenizer_file: str | None = None  # lm subwords: the tokenizer.json that decodes these ids (kept in the run dir)
    prior_loss: float | None = None  # loss of predicting only the targets' frequencies (or mean); see prior.py
    ignore_index: int | None = None  # the target value the loss leaves out (loss.ignore_index); never for regression
    loss_function: str | None = None  # regression: the loss its targets get (loss.function: mse, l1, huber, bce)
    user_loss: str | None = None  # loss._target_'s path, or "model": the loss is not the harness's to know

    @property
    def num_classes(self) -> int | None:
        return self.out_features if self.task in ("classification", NO_TASK) else None  # without a task: read labels

    @property
    def chance_loss(self) -> float | None:
        """Loss of a uniform prediction: ln(K) for K classes; the doctor and diagnosis use it."""
        k = self.vocab_size if self.task == "lm" else self.out_features
        return float(np.log(k)) if self.task != "regression" and k and self.user_loss is None else None

    def model_fields(self) -> dict[str, object]:
        """What a model's constructor may ask for by name."""
        fields = {name: getattr(self, name) for name in MODEL_FIELDS}
        return {k: v for k, v in fields.items() if v is not None}


@dataclass(frozen=True)
class Splits:
    """What a data option builds. `test` is scored by mode=eval only: training never reads it."""

    train: Dataset
    val: Dataset
    meta: DataMeta
    test: Dataset | None = None


class ArrayDataset(Dataset):
    """A dataset held in arrays: a whole batch is gathered with one indexing operation, which is
    ~15x cheaper than collating samples one by one. Its samples hold no randomness."""

    def gather(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Inputs and targets for the given sample indices (CPU tensors)."""
        raise NotImplementedError

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.gather(torch.tensor([i]))
        return x[0], y[0]


Tokens = Union[np.ndarray, TokenFile]  # ids in memory, or in a file read on demand


def token_windows(tokens: Tokens, starts: np.ndarray, width: int) -> np.ndarray:
    """tokens[s : s + width] for each start, as one (len(starts), width) array."""
    if isinstance(tokens, TokenFile):
        return tokens.windows(starts, width)
    return tokens[starts[:, None] + np.arange(width)]


class TokenWindows(ArrayDataset):
    """Every window of block_size+1 consecutive tokens is one sample (nanoGPT's sampling)."""

    def __init__(self, tokens: Tokens, block_size: int) -> None:
        if len(tokens) <= block_size + 1:
            raise ValueError(f"only {len(tokens)} tokens, need more than block_size+1={block_size + 1}")
        self.tokens, self.block_size = tokens, block_size

    def __len__(self) -> int:
        return len(self.tokens) - self.block_size

    def gather(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        window = torch.from_numpy(token_windows(self.tokens, idx.numpy(), self.block_size + 1).astype(np.int64))
        return window[:, :-1], window[:, 1:]


class TensorPairs(ArrayDataset):
    """In-memory (x, y) tensors, for vector tasks."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def gather(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[idx], self.y[idx]



def token_splits(streams: Mapping[str, Tokens], meta: DataMeta) -> Splits:
    """Language-model splits from token streams by split name (`test` optional)."""
    windows = {name: TokenWindows(tokens, int(meta.block_size)) for name, tokens in streams.items()}
    return Splits(windows["train"], windows["val"], meta, windows.get("test"))
