"""Count the host reads of tensor values: the reads that stall a GPU's launch queue.

On a GPU every `.item()`, `.tolist()`, `bool(t)` or `float(t)` of a device tensor blocks the host
until the device catches up. CPU-only machines cannot see those stalls, so this counter makes them
visible anywhere: it counts reads at the Python level (`tolist` converts CPU tensors without
dispatch, so a dispatch-level count alone would miss it) and, for reads made inside torch's own
C++ code, `aten._local_scalar_dense` and the ops whose output shape depends on the data.

Two kinds of read are host bookkeeping by design and are left out: the data pipeline's index
tensors (built on the host by the sampler) and the step counters torch's optimizers keep on the host.
"""
from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

HARNESS = str(Path(__file__).resolve().parents[1])
HOST_SIDE_DIRS = (str(Path(HARNESS) / "data"),)  # index bookkeeping lives on the host anyway
TORCH = str(Path(torch.__file__).resolve().parent)
TORCH_OPTIM = str(Path(TORCH) / "optim")
PYTHON_READS = ("item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__index__")
# aten ops that copy a value to the host: a scalar read, or an output shape the data decides
DISPATCH_READS = ("_local_scalar_dense", "nonzero", "masked_select", "is_nonzero", "equal", "unique",
                  "_unique", "_unique2", "unique_consecutive", "unique_dim")

MASK_INDEXING = ("index", "index_put", "index_put_", "_index_put_impl_")  # t[mask]: how many are True?


def _has_mask(args: tuple) -> bool:
    indices = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)


@dataclass
class HostReads:
    """Reads seen so far: one (what, where) entry per read, `where` being the caller's file:line."""

    reads: list[tuple[str, str]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.reads)

    def clear(self) -> None:
        self.reads.clear()


def _caller(frame: FrameType | None) -> tuple[str, bool]:
    """The first frame outside torch (file:line) and whether a torch.optim frame came before it."""
    in_optim = False
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(TORCH_OPTIM):
            in_optim = True
        if not name.startswith(TORCH) and name != __file__:
            return f"{name}:{frame.f_lineno}", in_optim
        frame = frame.f_back
    return "?", in_optim


class _Dispatch(TorchDispatchMode):
    def __init__(self, record: Callable[[str], None]) -> None:
        super().__init__()
        self.record = record

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        name = func.overloadpacket.__name__
        if name in DISPATCH_READS or (name in MASK_INDEXING and _has_mask(args)):
            self.record(f"aten.{name}")
        return func(*args, **(kwargs or {}))


class count_host_reads:
    """Context manager: `with count_host_reads() as seen: ...; seen.count`.

    Patches torch.Tensor's reading methods for the duration, so use it in one thread at a time.
    """

    def __init__(self) -> None:
        self.seen = HostReads()
        self._inside = threading.local()
        self._saved: dict[str, Any] = {}
        self._mode = _Dispatch(self._record)

    def _record(self, what: str) -> None:
        if getattr(self._inside, "active", False):  # a Python-level read already counted this one
            return
        where, in_optim = _caller(sys._getframe(1))
        if in_optim or where.startswith(HOST_SIDE_DIRS):
            return
        self.seen.reads.append((what, where))

    def _wrap(self, name: str, original: Callable) -> Callable:
        def reading(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            outer = getattr(self._inside, "active", False)
            if not outer:
                self._record(f"Tensor.{name}")
            self._inside.active = True
            try:
                return original(tensor, *args, **kwargs)
            finally:
                self._inside.active = outer
        return reading

    def __enter__(self) -> HostReads:
        for name in PYTHON_READS:
            self._saved[name] = torch.Tensor.__dict__.get(name)  # None: inherited from the C base class
            setattr(torch.Tensor, name, self._wrap(name, getattr(torch.Tensor, name)))
        self._mode.__enter__()
        return self.seen

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._mode.__exit__(exc_type, exc, tb)
        for name, original in self._saved.items():
            if original is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)
