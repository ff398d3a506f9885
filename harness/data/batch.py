"""Batches of any structure (a tensor, a tuple or list, a dict, nested), as a user's objective
reads them: moved to the device leaf by leaf, sized by their first tensor, described in one line."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch


def map_tensors(batch: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """`batch` with `fn` applied to every tensor leaf; containers keep their type (a namedtuple,
    an HF BatchEncoding), other leaves (strings, numbers) stay as they are."""
    if isinstance(batch, torch.Tensor):
        return fn(batch)
    if isinstance(batch, Mapping):
        items = {key: map_tensors(value, fn) for key, value in batch.items()}
        try:
            return type(batch)(items)
        except TypeError:  # a mapping type that cannot be built from a dict
            return items
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(map_tensors(value, fn) for value in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(map_tensors(value, fn) for value in batch)
    return batch


def as_float32(batch: Any) -> Any:
    """float64 leaves (numpy's default) become float32, as (input, target) batches do."""
    return map_tensors(batch, lambda t: t.float() if t.dtype == torch.float64 else t)


def to_device(batch: Any, device: torch.device, non_blocking: bool = False) -> Any:
    return map_tensors(batch, lambda t: t.to(device, non_blocking=non_blocking))


def tensors(batch: Any) -> list[torch.Tensor]:
    """Every tensor leaf, in order."""
    found: list[torch.Tensor] = []
    map_tensors(batch, lambda t: found.append(t) or t)
    return found


def batch_size(batch: Any) -> int:
    """Samples in a batch: its first tensor leaf's leading size (1 for a batch without one)."""
    leaves = tensors(batch)
    return int(leaves[0].shape[0]) if leaves and leaves[0].dim() else 1


def describe_batch(batch: Any) -> str:
    """`dict(input_ids=[8, 16] int64, labels=[8] int64)`: a batch's structure in one line."""
    if isinstance(batch, torch.Tensor):
        return f"{list(batch.shape)} {str(batch.dtype).removeprefix('torch.')}"
    if isinstance(batch, Mapping) or hasattr(batch, "__dataclass_fields__"):  # a dict, an HF ModelOutput
        items = batch.items() if isinstance(batch, Mapping) else vars(batch).items()
        return f"{type(batch).__name__}(" + ", ".join(f"{k}={describe_batch(v)}" for k, v in items) + ")"
    if isinstance(batch, (tuple, list)):
        return f"{type(batch).__name__}(" + ", ".join(describe_batch(v) for v in batch) + ")"
    return type(batch).__name__
