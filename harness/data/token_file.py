"""Token ids stored in a file (nanoGPT's uint16 .bin layout), read with pread, never mapped.

A numpy memmap keeps every page it has touched mapped into the process, and on current kernels
a fault maps a whole large folio (hundreds of KB) at a time: a thousand small reads spread over
a 2 GB corpus left 780 MB resident, and random training windows grow a run's RSS towards the
corpus size (nanoGPT re-creates its memmap at every batch for this reason). pread copies just
the bytes asked for; the file's pages stay in the OS cache, shared and reclaimable.
"""
from __future__ import annotations

import os
import weakref
from pathlib import Path

import numpy as np


class TokenFile:
    """A read-only view of ids [start, stop) of a file; slicing gives another view, reading copies."""

    def __init__(self, path: str | Path, dtype: np.dtype | type = np.uint16, start: int = 0,
                 stop: int | None = None) -> None:
        self.path, self.dtype = Path(path), np.dtype(dtype)
        total = self.path.stat().st_size // self.dtype.itemsize
        self.start, self.stop = start, total if stop is None else stop
        self._fd: int | None = None
        self._pid = -1  # a forked DataLoader worker opens its own descriptor

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, key: slice) -> TokenFile:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a TokenFile is sliced by contiguous ranges; read() copies ids out")
        start, stop, _ = key.indices(len(self))
        return TokenFile(self.path, self.dtype, self.start + start, self.start + max(start, stop))

    def __array__(self, dtype: np.dtype | None = None, copy: bool | None = None) -> np.ndarray:
        ids = self.read(0, len(self))
        return ids if dtype is None else ids.astype(dtype)

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fd": None, "_pid": -1}

    def _descriptor(self) -> int:
        if self._pid != os.getpid():
            self._fd, self._pid = os.open(self.path, os.O_RDONLY), os.getpid()
            weakref.finalize(self, os.close, self._fd)
        return self._fd

    def read(self, start: int, stop: int) -> np.ndarray:
        """Ids [start, stop) of this view, copied into a new array."""
        out = np.empty(stop - start, self.dtype)
        self._read_into(out, start)
        return out

    def windows(self, starts: np.ndarray, width: int) -> np.ndarray:
        """Ids [s, s + width) for each start, as a (len(starts), width) array: one pread a row."""
        out = np.empty((len(starts), width), self.dtype)
        for row, start in zip(out, starts.tolist()):
            self._read_into(row, start)
        return out

    def _read_into(self, out: np.ndarray, start: int) -> None:
        if start < 0 or start + len(out) > len(self):
            raise IndexError(f"ids [{start}, {start + len(out)}) outside a view of {len(self)} in {self.path}")
        offset = (self.start + start) * self.dtype.itemsize
        done = os.preadv(self._descriptor(), [memoryview(out).cast("B")], offset)
        if done != out.nbytes:
            raise OSError(f"{self.path}: read {done} of {out.nbytes} bytes at {offset} (was it truncated?)")
