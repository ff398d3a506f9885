"""From sample indices to (input, target) batches, through torch DataLoaders.

The BatchStream stays the one source of truth for which samples an update, a rank and a
micro-batch see. A DataLoader's batch sampler replays that same order from the stream's
position, so workers, pinned memory, user Datasets and collate functions come for free while
exact resume, accumulation invariance and world-size invariance keep holding: on resume (or a
rollback) the sampler restarts at the stream's position and the workers simply refill.

A sample's random transforms are seeded by (run seed, epoch, sample index) before it is read,
so augmentation does not depend on the number of workers, ranks or micro-batches, and a
resumed run draws exactly what an uninterrupted one would have drawn.
"""
from __future__ import annotations

import logging
import multiprocessing
import pickle
import random
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import Any, NamedTuple

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import DataLoader, Dataset, default_collate, get_worker_info

from harness.data.base import ArrayDataset
from harness.data.batch import as_float32
from harness.data.sampler import BatchStream, MicroBatch, split_for_rank
from harness.core.callables import locate
from harness.core.errors import ConfigError, DataError, one_line, user_frames
from harness.core.typed_config import at_least, one_of, setting

log = logging.getLogger("harness")
EVAL_EPOCH = -1  # validation samples get the same transforms at every eval
# conf/train.yaml's `data:` block: the keys every data option shares (the sampler's and the loader's)
SHARED_DATA_KEYS = ("shuffle", "num_workers", "pin_memory", "persistent_workers", "prefetch_factor", "collate_fn",
                    "worker_start", "standardize", "standardize_targets")
WORKER_STARTS = ("auto", "fork", "forkserver", "spawn")
HF_INPUT, HF_MASK, HF_LABELS = "input_ids", "attention_mask", "labels"  # a Hugging Face model's dict batch
PIN_MEMORY = ("auto", True, False)


def ignore_ctrl_c(_worker_id: int) -> None:
    """A worker ignores SIGINT: Ctrl-C in a terminal reaches the whole process group, and a worker
    that died of it would fail the very batch the run needs to reach its checkpoint. The main
    process stops the workers when it stops."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def fork_hazards() -> list[str]:
    """What runs threads in this process besides torch's own pools (which torch re-creates in a
    forked child): a process group's (gloo's, NCCL's, the TCP store's native threads) and Python
    threads (a tracker's uploader, the user's own)."""
    hazards = []
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        hazards.append(f"the {torch.distributed.get_backend()} process group's threads")
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread()]
    if others:
        hazards.append(f"Python threads {', '.join(sorted(others))}")
    return hazards


class _Discard:
    """A file that keeps nothing."""

    def write(self, data: bytes) -> int:
        return len(data)


class _ProbePickler(pickle.Pickler):
    """Pickles a dataset's Python objects and skips its arrays: what cannot travel to a fresh
    process is a lambda, an open file or a lock, never a tensor (workers get those by a shared
    memory handle), and skipping them keeps the check free of a copy of the data."""

    def persistent_id(self, obj: Any) -> int | None:
        return id(obj) if isinstance(obj, (torch.Tensor, torch.UntypedStorage, np.ndarray)) else None


def pickle_problem(reader: Dataset) -> str | None:
    """Why the workers' dataset cannot be sent to a fresh process, or None when it can."""
    try:
        _ProbePickler(_Discard(), pickle.HIGHEST_PROTOCOL).dump(reader)
    except Exception as err:  # noqa: BLE001 - whatever a user's dataset holds (a lambda, a handle, a lock)
        return one_line(err)
    return None


_warned: set[str] = set()


def _warn_once(message: str, *args: Any) -> None:
    """The training and the validation loader meet the same dataset problem: one line says it (a
    different problem still gets its own)."""
    line = message % args
    if line not in _warned:
        _warned.add(line)
        log.warning(line)


def worker_context(choice: str, reader: Dataset) -> BaseContext | None:
    """How DataLoader workers start (`data.worker_start`).

    fork copies the training process as it is, other threads' locks included: with a process
    group's threads alive (DDP, FSDP) a worker can inherit a lock that nobody will release and
    hang before its first batch, which is why CPython 3.12 warns on such forks and 3.14 made
    forkserver Linux's default. `auto` forks when nothing but torch's pools runs threads
    (fastest: nothing is pickled, and the dataset's memory is shared) and otherwise starts the
    workers from a forkserver, which imports torch once, before any thread exists. A dataset that
    cannot be pickled cannot reach a forkserver's worker: `auto` then forks with a warning, and an
    explicit forkserver or spawn is refused in one line."""
    method = choice
    if choice == "auto":
        hazards = fork_hazards()
        if sys.platform != "linux" or not hazards:
            return None  # the platform's own default: fork on Linux, spawn elsewhere
        method = "forkserver"
    if method == "fork":
        return multiprocessing.get_context("fork")
    problem = pickle_problem(reader)
    if problem is not None and choice == "auto":
        _warn_once("data: the dataset cannot be pickled (%s), so its workers are forked beside %s, where a "
                   "worker can rarely hang; a picklable dataset is started safely (data.worker_start=fork "
                   "silences this)", problem, " and ".join(hazards))
        return multiprocessing.get_context("fork")
    if problem is not None:
        raise ConfigError("data.worker_start", choice, f"fork, or a picklable dataset ({problem})")
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["__main__", "torch", "harness.data.loader"])  # each worker forks from these
    return context


@dataclass(frozen=True)
class LoadingConfig:
    """The `data` keys every option shares (conf/train.yaml's data block): how batches are read."""

    num_workers: int = setting(0, "an integer >= 0 (0 reads batches in the training process)", at_least(0))
    pin_memory: str | bool = setting("auto", "auto (on for CUDA), true or false", one_of(PIN_MEMORY))
    shuffle: bool = setting(True, "true (a new sample order every epoch) or false")
    persistent_workers: bool = setting(True, "true or false")
    standardize: bool = setting(False, "true (each input feature scaled by the training split's mean and std) or false")
    standardize_targets: bool = setting(False, "true (each regression target scaled by the training split's mean and "
                                               "std) or false")
    prefetch_factor: int | None = setting(None, "null (torch's default, 2) or an integer >= 1", at_least(1))
    worker_start: str = setting("auto", "auto (fork, or a forkserver when other threads run), fork, forkserver or "
                                        "spawn", one_of(WORKER_STARTS))

    def settings(self, device_type: str) -> LoaderSettings:
        """The DataLoader settings on a device of this type (`pin_memory: auto` pins for CUDA)."""
        pin = device_type == "cuda" if self.pin_memory == "auto" else bool(self.pin_memory)
        return LoaderSettings(num_workers=self.num_workers, pin_memory=pin, persistent_workers=self.persistent_workers,
                              prefetch_factor=self.prefetch_factor, worker_start=self.worker_start)


@dataclass(frozen=True)
class LoaderSettings:
    """The `data.num_workers`, `data.pin_memory`, ... keys, resolved for one device."""

    num_workers: int = 0
    pin_memory: bool = False
    persistent_workers: bool = True
    prefetch_factor: int | None = None
    worker_start: str = "auto"

    def loader_kwargs(self, reader: Dataset) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"num_workers": self.num_workers, "pin_memory": self.pin_memory}
        if self.num_workers:
            kwargs["worker_init_fn"] = ignore_ctrl_c
            kwargs["persistent_workers"] = self.persistent_workers
            kwargs["multiprocessing_context"] = worker_context(self.worker_start, reader)
            if self.prefetch_factor is not None:
                kwargs["prefetch_factor"] = self.prefetch_factor
        return kwargs


@dataclass(frozen=True)
class InputScale:
    """Per-element statistics every input batch is standardised with (`data.standardize`)."""

    mean: torch.Tensor  # the shape of one sample's input
    std: torch.Tensor

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


@dataclass(frozen=True)
class BatchRecipe:
    """How a list of samples becomes one (input, target) batch."""

    collate_fn: Callable[[list[Any]], Any] | None = None  # None: torch's default_collate
    input_key: str | list[str] | None = None  # dict samples: the input field(s)
    target_key: str | None = None  # dict samples: the target field
    scale: InputScale | None = None  # data.standardize: the training split's statistics
    whole: bool = False  # the user's objective reads the whole batch: no (input, target) split

    @classmethod
    def from_config(cls, cfg: DictConfig) -> BatchRecipe:
        """From `data.collate_fn` (a path, or a node with `_target_`), `data.input_key`, `data.target_key`."""
        collate = cfg.get("collate_fn")
        path = collate.get("_target_") if OmegaConf.is_dict(collate) else collate
        function = locate("data.collate_fn", path) if path is not None else None
        if function is not None and not callable(function):
            raise ConfigError("data.collate_fn", path, "a function that turns a list of samples into a batch")
        input_key = cfg.get("input_key")
        input_key = OmegaConf.to_container(input_key) if OmegaConf.is_list(input_key) else input_key
        return cls(function, input_key, cfg.get("target_key"))

    def pair(self, batch: Any) -> tuple[Any, torch.Tensor | None]:
        """The (input, target) of a collated batch; float64 becomes float32, as numpy arrays are float64.
        A `whole` recipe keeps the batch as it is, in the first place: (batch, None). Dict samples
        without keys set are read by Hugging Face's names when they hold them (input_ids, labels)."""
        if self.whole:
            return as_float32(batch), None
        if isinstance(batch, Mapping):
            x, y = (self._field(batch, _or_hf_name(key, default, batch), name)
                    for key, default, name in ((self.input_key, HF_INPUT, "data.input_key"),
                                               (self.target_key, HF_LABELS, "data.target_key")))
        elif isinstance(batch, Sequence) and not isinstance(batch, str) and len(batch) >= 2:
            x, y = batch[0], batch[1]
        else:
            raise ValueError(f"a sample must be an (input, target) pair or a dict, not {type(batch).__name__}")
        return self.scaled(_as_tensor(x, "input")), _as_tensor(y, "target")

    def scaled(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale(x) if self.scale is not None else x

    @staticmethod
    def _field(batch: Mapping, key: str | list[str] | None, name: str) -> Any:
        """One field, or several scalar fields side by side (`data.input_key=[age,height]`)."""
        keys = key if isinstance(key, list) else [key]
        missing = [k for k in keys if k is None or k not in batch]
        if missing:
            raise ValueError(f"dict samples need {name} set to their fields (one name or a list) among "
                             f"{sorted(map(str, batch))}" + (f", not {key!r}" if key is not None else ""))
        if isinstance(key, list):
            return torch.stack([_as_tensor(batch[k], k).float() for k in keys], dim=-1)
        return batch[key]


def _or_hf_name(key: str | list[str] | None, hf_name: str, batch: Mapping) -> str | list[str] | None:
    """The key set, or, when none is, Hugging Face's name for the field if the batch holds it."""
    return hf_name if key is None and hf_name in batch else key


def _as_tensor(value: Any, what: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"the batch's {what} is a {type(value).__name__}, not a tensor "
                         f"(samples should hold tensors, numpy arrays or numbers)")
    return value.float() if value.dtype == torch.float64 else value


class Ticket(NamedTuple):
    """One micro-batch to read: its sample indices, and the epoch its random transforms are seeded with."""

    indices: list[int]
    epoch: int


class Fetched(NamedTuple):
    indices: list[int]
    x: Any  # a whole batch, for the user's objective
    y: torch.Tensor | None


class FetchFailure(NamedTuple):
    """Returned instead of raised, so the message (and the user's frames: a traceback does not
    cross from a worker) survives the trip back intact."""

    message: str
    frames: str = ""


def _sample_seed(seed: int, epoch: int, index: int) -> int:
    return (seed * 1_000_003 + (epoch + 1) * 7_919 + index * 104_729) % 2**32


class _RngSnapshot:
    """Python, numpy and torch RNG states, put back after reading samples in the training process."""

    def __init__(self) -> None:
        self.states = random.getstate(), np.random.get_state(), torch.get_rng_state()

    def restore(self) -> None:
        random.setstate(self.states[0])
        np.random.set_state(self.states[1])
        torch.set_rng_state(self.states[2])


def _read_sample(dataset: Dataset, index: int, seed: int, epoch: int) -> Any:
    """`dataset[index]` with the RNGs its random transforms draw from seeded for this sample."""
    s = _sample_seed(seed, epoch, index)
    random.seed(s)
    np.random.seed(s)
    torch.default_generator.manual_seed(s)  # CPU only: torch.manual_seed also reseeds every
    # accelerator (~0.1 ms a call), and a transform on an accelerator in a loader is rare
    return dataset[index]


def peek(dataset: Dataset, index: int) -> Any:
    """One raw sample, read as validation reads it, leaving this process's RNG streams untouched."""
    snapshot = _RngSnapshot()
    try:
        return _read_sample(dataset, index, 0, EVAL_EPOCH)
    finally:
        snapshot.restore()


def read_batch(dataset: Dataset, recipe: BatchRecipe, seed: int, ticket: Ticket) -> Fetched | FetchFailure:
    """Read and collate one micro-batch; any error becomes a one-line FetchFailure naming the sample."""
    if isinstance(dataset, ArrayDataset) and recipe.collate_fn is None:
        x, y = dataset.gather(torch.tensor(ticket.indices, dtype=torch.long))
        return Fetched(ticket.indices, [x, y], None) if recipe.whole else Fetched(ticket.indices, recipe.scaled(x), y)
    snapshot = _RngSnapshot() if get_worker_info() is None else None  # a worker's RNG is its own
    try:
        samples = []
        for index in ticket.indices:
            try:
                samples.append(_read_sample(dataset, index, seed, ticket.epoch))
            except Exception as err:  # noqa: BLE001 - whatever a user's __getitem__ raises
                return FetchFailure(f"sample {index} could not be read: {one_line(err)}", user_frames(err))
        try:
            batch = (recipe.collate_fn or default_collate)(samples)
            return Fetched(ticket.indices, *recipe.pair(batch))
        except Exception as err:  # noqa: BLE001 - a user's collate_fn, or samples that do not stack
            return FetchFailure(f"samples {_shorten(ticket.indices)} could not be collated: {one_line(err)}",
                                user_frames(err))
    finally:
        if snapshot is not None:
            snapshot.restore()


def _shorten(indices: list[int], shown: int = 4) -> str:
    return str(indices[:shown])[:-1] + (", ...]" if len(indices) > shown else "]")


class _Reader(Dataset):
    """What the DataLoader indexes: a whole Ticket at a time (DataLoader hands `__getitems__` the batch)."""

    def __init__(self, dataset: Dataset, recipe: BatchRecipe, seed: int) -> None:
        self.dataset, self.recipe, self.seed = dataset, recipe, seed

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitems__(self, ticket: Ticket) -> Fetched | FetchFailure:
        return read_batch(self.dataset, self.recipe, self.seed, ticket)


def _as_is(batch: Any) -> Any:
    return batch


def _loader(dataset: Dataset, recipe: BatchRecipe, seed: int, tickets: Any, settings: LoaderSettings) -> DataLoader:
    # Its own generator: creating an iterator must not draw from the global RNG (dropout's).
    reader = _Reader(dataset, recipe, seed)
    return DataLoader(reader, batch_sampler=tickets, collate_fn=_as_is,
                      generator=torch.Generator().manual_seed(seed), **settings.loader_kwargs(reader))


def shut_down(loader: DataLoader, iterator: Iterator | None = None) -> None:
    """Stop a loader's worker processes now. Left to the garbage collector, they linger, and a
    collection that happens inside a later run can stall it for seconds while they are joined."""
    for it in (iterator, getattr(loader, "_iterator", None)):
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
    loader._iterator = None


def _unpack(result: Fetched | FetchFailure, split: str) -> Fetched:
    if isinstance(result, FetchFailure):
        error = DataError(f"data: {split} {result.message}")
        error.frames = result.frames
        raise error
    return result


def _next(iterator: Iterator, split: str) -> Fetched:
    try:
        return _unpack(next(iterator), split)
    except DataError:
        raise
    except Exception as err:  # noqa: BLE001 - a worker that died (killed, out of memory) ends the same way
        raise DataError(f"data: the {split} DataLoader failed: {one_line(err)}") from None


def fetch(dataset: Dataset, recipe: BatchRecipe, indices: torch.Tensor, seed: int = 0,
          split: str = "train") -> tuple[torch.Tensor, torch.Tensor]:
    """One batch read in this process, for checks that pick their own samples."""
    return _unpack(read_batch(dataset, recipe, seed, Ticket(indices.tolist(), EVAL_EPOCH)), split)[1:]


class _StreamTickets:
    """A DataLoader batch sampler: this rank's micro-batches, from a copy of the stream at `start`."""

    def __init__(self, stream: BatchStream, rank: int, world_size: int, accum: int) -> None:
        self.template, self.rank, self.world_size, self.accum = stream, rank, world_size, accum
        self.start: dict[str, int] = stream.state_dict()
        self.skip = 0  # micro-batches of the first update already consumed

    def __iter__(self) -> Iterator[Ticket]:
        stream = self.template.replica()
        stream.load_state_dict(self.start)
        skip = self.skip
        while True:
            batch = stream.next_batch()
            for mb in split_for_rank(batch, self.rank, self.world_size, self.accum):
                if skip:
                    skip -= 1
                    continue
                yield Ticket(mb.indices.tolist(), stream.batch_epoch)


class TrainBatches:
    """Each update's micro-batches: which ones from the stream, their data from a DataLoader running ahead."""

    def __init__(self, dataset: Dataset, recipe: BatchRecipe, settings: LoaderSettings, stream: BatchStream,
                 rank: int, world_size: int, accum: int, seed: int) -> None:
        self.stream, self.rank, self.world_size, self.accum = stream, rank, world_size, accum
        self._tickets = _StreamTickets(stream, rank, world_size, accum)
        self._loader = _loader(dataset, recipe, seed, self._tickets, settings)
        self._iter: Iterator | None = None
        self._update_start = stream.state_dict()
        self._fetched = 0  # micro-batches of the current update read so far

    def next_update(self) -> list[MicroBatch]:
        """This rank's micro-batches of the next update; advances the stream."""
        self._update_start, self._fetched = self.stream.state_dict(), 0
        return split_for_rank(self.stream.next_batch(), self.rank, self.world_size, self.accum)

    def fetch(self, mb: MicroBatch) -> tuple[torch.Tensor, torch.Tensor]:
        if self._iter is None:  # (re)start the loader where the stream stands
            self._tickets.start, self._tickets.skip = self._update_start, self._fetched
            self._iter = iter(self._loader)
        fetched = _next(self._iter, "train")
        self._fetched += 1
        if fetched.indices != mb.indices.tolist():
            raise RuntimeError("the DataLoader fell out of step with the batch stream")
        return fetched.x, fetched.y

    def state_dict(self) -> dict[str, int]:
        return self.stream.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Move the stream; the loader restarts there (its read-ahead batches are dropped)."""
        self.stream.load_state_dict(state)
        self._update_start, self._fetched = self.stream.state_dict(), 0
        if self._iter is not None and self._iter is not getattr(self._loader, "_iterator", None):
            shut_down(self._loader, self._iter)  # not persistent: its workers would linger
        self._iter = None

    def close(self) -> None:
        shut_down(self._loader, self._iter)
        self._iter = None


class FixedBatches:
    """The same samples for every update, read in this process (the doctor's overfit check)."""

    def __init__(self, dataset: Dataset, recipe: BatchRecipe, indices: torch.Tensor, rank: int,
                 world_size: int, accum: int) -> None:
        self.dataset, self.recipe, self.indices = dataset, recipe, indices
        self.rank, self.world_size, self.accum = rank, world_size, accum

    def next_update(self) -> list[MicroBatch]:
        return split_for_rank(self.indices, self.rank, self.world_size, self.accum)

    def fetch(self, mb: MicroBatch) -> tuple[torch.Tensor, torch.Tensor]:
        return fetch(self.dataset, self.recipe, mb.indices)


class EvalBatches:
    """The same micro-batches at every eval, through a DataLoader of their own."""

    def __init__(self, dataset: Dataset, recipe: BatchRecipe, settings: LoaderSettings, indices: torch.Tensor,
                 micro_batch: int, seed: int, split: str = "val") -> None:
        tickets = [Ticket(chunk.tolist(), EVAL_EPOCH) for chunk in indices.split(micro_batch)]
        self._loader = _loader(dataset, recipe, seed, tickets, settings)
        self.split = split

    def close(self) -> None:
        shut_down(self._loader)

    def __len__(self) -> int:
        return len(self._loader.batch_sampler)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        iterator = iter(self._loader)
        for _ in range(len(self._loader.batch_sampler)):
            yield _next(iterator, self.split)[1:]
