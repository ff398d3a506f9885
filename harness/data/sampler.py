"""Which samples each optimizer update sees: a reshuffled pass per epoch, resumable from two integers.

The global batch of an update is fixed by (seed, epoch, offset) alone; it is then cut into
ranks and accumulation micro-batches. So accum=4 x 16 sees exactly the samples of accum=1 x 64,
and 2 ranks x 32 those of 1 process x 64 (the same contract as DistributedSampler + set_epoch).

An epoch's order is a keyed bijection of [0, n) (a Feistel network with cycle walking), evaluated
a chunk of positions at a time, never a materialised permutation of every sample: a language
corpus has a sample per token position, and `randperm` over billions of them would cost ~10
bytes of RAM per token and seconds at every epoch boundary. Memory and start-up are O(chunk),
whatever the corpus. Everything runs on the calling thread: torch work on a side thread starts a
second OpenMP team, and libgomp then throttles the training thread's team (docs/architecture.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

CHUNK = 1 << 16  # positions evaluated together: ~3 ms of numpy, amortised over the chunk's batches
ROUNDS = 6  # Feistel rounds; 4 already make a pseudo-random permutation (Luby-Rackoff)
EVAL_KEY = (0, 0xE7A1)  # the eval sample's permutation: one for every run seed
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)  # splitmix64's finaliser


@dataclass
class MicroBatch:
    indices: torch.Tensor


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: every output bit depends on every input bit (uint64 wraps)."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    return x ^ (x >> np.uint64(31))


class KeyedPermutation:
    """A pseudo-random bijection of [0, n), chosen by `key`, computed per position in O(1) memory.

    An alternating Feistel network permutes [0, 2^bits) with 2^bits < 2n; a position that lands
    at or past n is mapped again until it falls inside (cycle walking), which keeps it a
    bijection of [0, n). Expected walks per position: fewer than two."""

    def __init__(self, n: int, key: tuple[int, ...]) -> None:
        self.n = n
        self.bits = max(2, (n - 1).bit_length())
        seeds = np.random.SeedSequence([k % 2**64 for k in key]).generate_state(ROUNDS, np.uint64)
        self.round_keys = [np.uint64(k) for k in seeds]

    def _feistel(self, x: np.ndarray) -> np.ndarray:
        low_bits = self.bits // 2
        for key in self.round_keys:
            high_bits = self.bits - low_bits
            low = x & np.uint64((1 << low_bits) - 1)
            high = x >> np.uint64(low_bits)
            # (high, low) -> (low, high ^ F(low)): invertible whatever F, so each round is a bijection
            x = (low << np.uint64(high_bits)) | (high ^ (_mix(low ^ key) & np.uint64((1 << high_bits) - 1)))
            low_bits = high_bits
        return x

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """The images of positions in [0, n)."""
        out = self._feistel(positions.astype(np.uint64))
        outside = np.flatnonzero(out >= self.n)
        while len(outside):
            out[outside] = self._feistel(out[outside])
            outside = outside[out[outside] >= self.n]
        return out.astype(np.int64)


@lru_cache(maxsize=4)  # the trainer's stream and the DataLoader's replica walk the same chunk
def _order_chunk(num_samples: int, seed: int, epoch: int, shuffle: bool, chunk: int) -> torch.Tensor:
    positions = np.arange(chunk * CHUNK, min((chunk + 1) * CHUNK, num_samples), dtype=np.int64)
    if not shuffle:
        return torch.from_numpy(positions)
    return torch.from_numpy(KeyedPermutation(num_samples, (seed, epoch))(positions))


def epoch_slice(num_samples: int, seed: int, epoch: int, shuffle: bool, start: int, stop: int) -> torch.Tensor:
    """Positions [start, stop) of an epoch's sample order (the stored order when not shuffled).
    Callers never modify the result: chunks are shared."""
    first, last = start // CHUNK, (stop - 1) // CHUNK
    parts = [_order_chunk(num_samples, seed, epoch, shuffle, c) for c in range(first, last + 1)]
    order = parts[0] if len(parts) == 1 else torch.cat(parts)
    base = first * CHUNK
    return order[start - base : stop - base]


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

    def next_batch(self) -> torch.Tensor:
        """Global indices of the next update; the epoch's tail gives one smaller batch (skipped
        when it holds fewer than min_batch samples)."""
        take = min(self.batch_size, self.num_samples - self.offset)
        take -= take % self.world_size  # every rank gets the same count
        if take < self.min_batch:
            self.epoch, self.offset = self.epoch + 1, 0
            return self.next_batch()
        batch = epoch_slice(self.num_samples, self.seed, self.epoch, self.shuffle, self.offset, self.offset + take)
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
    return [MicroBatch(c) for c in chunks]


def eval_indices(num_samples: int, count: int) -> torch.Tensor:
    """A fixed sample of the validation set, identical at every eval and for every run seed:
    the first `count` positions of a fixed keyed permutation, so O(count) whatever the split's size."""
    positions = np.arange(min(count, num_samples), dtype=np.int64)
    return torch.from_numpy(KeyedPermutation(num_samples, EVAL_KEY)(positions))
