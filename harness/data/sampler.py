"""Which samples each optimizer update sees: a reshuffled pass per epoch, resumable from two integers.

The global batch of an update is fixed by (seed, epoch, offset) alone; it is then cut into
ranks and accumulation micro-batches. So accum=4 x 16 sees exactly the samples of accum=1 x 64,
and 2 ranks x 32 those of 1 process x 64 (the same contract as DistributedSampler + set_epoch).
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import torch


@dataclass
class MicroBatch:
    indices: torch.Tensor
    weight: float  # share of this rank's samples in the update: the loss is scaled by it


OrderKey = tuple[int, int, int, bool]  # (num_samples, seed, epoch, shuffle)
_ORDERS: dict[OrderKey, Future[torch.Tensor]] = {}
_PERMUTER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="epoch-order")
KEPT_ORDERS = 2  # the trainer's stream and the DataLoader's replica walk the same epoch


def _order(num_samples: int, seed: int, epoch: int, shuffle: bool) -> torch.Tensor:
    if not shuffle:
        return torch.arange(num_samples)
    return torch.randperm(num_samples, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))


def prefetch_epoch_order(num_samples: int, seed: int, epoch: int, shuffle: bool) -> None:
    """Start permuting an epoch in a thread: millions of samples take most of a second, and torch
    releases the GIL meanwhile, so the model and optimizer get built in parallel."""
    key = (num_samples, seed, epoch, shuffle)
    if key not in _ORDERS:
        while len(_ORDERS) >= KEPT_ORDERS:
            _ORDERS.pop(next(iter(_ORDERS)))
        _ORDERS[key] = _PERMUTER.submit(_order, *key)


def epoch_order(num_samples: int, seed: int, epoch: int, shuffle: bool) -> torch.Tensor:
    """The sample order of one epoch, computed once for all its users (who never modify it)."""
    prefetch_epoch_order(num_samples, seed, epoch, shuffle)
    return _ORDERS[(num_samples, seed, epoch, shuffle)].result()


class BatchStream:
    def __init__(self, num_samples: int, batch_size: int, seed: int, world_size: int = 1,
                 shuffle: bool = True, min_batch: int | None = None) -> None:
        self.min_batch = max(min_batch or world_size, world_size)  # a smaller epoch tail is skipped
        if num_samples < self.min_batch:
            raise ValueError(f"{num_samples} samples cannot fill a batch of {self.min_batch} ({world_size} ranks)")
        self.num_samples, self.batch_size = num_samples, batch_size
        self.seed, self.world_size = seed, world_size
        self.shuffle = shuffle  # False: every epoch reads the dataset in its stored order
        self.epoch, self.offset = 0, 0
        self.batch_epoch = 0  # the epoch the last batch came from (seeds its samples' random transforms)
        self._perm: torch.Tensor | None = None
        self._perm_epoch = -1

    def _permutation(self) -> torch.Tensor:
        if self._perm_epoch != self.epoch:
            self._perm, self._perm_epoch = epoch_order(self.num_samples, self.seed, self.epoch, self.shuffle), self.epoch
        return self._perm

    def next_batch(self) -> torch.Tensor:
        """Global indices of the next update; the epoch's tail gives one smaller batch (skipped
        when it holds fewer than min_batch samples)."""
        take = min(self.batch_size, self.num_samples - self.offset)
        take -= take % self.world_size  # every rank gets the same count
        if take < self.min_batch:
            self.epoch, self.offset = self.epoch + 1, 0
            return self.next_batch()
        batch = self._permutation()[self.offset : self.offset + take]
        self.batch_epoch = self.epoch
        self.offset += take
        if self.num_samples - self.offset < self.min_batch:
            self.epoch, self.offset = self.epoch + 1, 0
        return batch

    def epochs_done(self) -> float:
        """Epochs read so far, as e + the read fraction of epoch e, where e is the epoch of the last
        batch: in (e, e + 1], so ceil(value) - 1 names that epoch even when the batch ended it."""
        done = self.offset if self.epoch == self.batch_epoch else self.num_samples
        return self.batch_epoch + done / self.num_samples

    def replica(self) -> BatchStream:
        """A stream of the same order, at the start; the DataLoader's sampler walks its own copy."""
        return BatchStream(self.num_samples, self.batch_size, self.seed, self.world_size, self.shuffle,
                           self.min_batch)

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "offset": self.offset}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.offset = int(state["epoch"]), int(state["offset"])


def split_for_rank(batch: torch.Tensor, rank: int, world_size: int, accum: int) -> list[MicroBatch]:
    """This rank's contiguous share of the global batch, cut into at most `accum` micro-batches."""
    share = batch.tensor_split(world_size)[rank]
    chunks = [c for c in share.tensor_split(accum) if len(c)]
    return [MicroBatch(c, len(c) / len(share)) for c in chunks]


def eval_indices(num_samples: int, count: int) -> torch.Tensor:
    """A fixed sample of the validation set, identical at every eval and for every run seed."""
    g = torch.Generator().manual_seed(0)
    return torch.randperm(num_samples, generator=g)[: min(count, num_samples)]
