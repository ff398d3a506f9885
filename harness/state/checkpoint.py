"""Atomic checkpoints that hold all training state, and finding the one to resume from.

Layout of RUN_DIR/checkpoints/:
  step_00000200.pt   the last `keep_last` step checkpoints
  best.pt            the checkpoint with the lowest validation loss so far
A file is written to a temporary name in the same directory, flushed and fsynced, then
renamed over the target, so a crash at any instant leaves every existing checkpoint valid.
A sharded model's checkpoints are directories instead (step_00000200.dcp/, best.dcp), written
by every rank together: harness/state/sharded_checkpoint.py.
"""
from __future__ import annotations

import os
import random
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import numpy as np
import torch

from harness.state.checksums import ChecksumWriter, footer_problem, manifest_problem
from harness.core.distributed import DistInfo, all_gather_objects
from harness.core.errors import WriteError, one_line, write_error
from harness.state.rundir import BEST_LINK, CKPT_DIR
from harness.state.files import atomic_write, fsync_dir, fsync_file, remove_path

STEP_PATTERN = re.compile(r"step_(\d{8})\.(pt|dcp)$")
SHARDED_SUFFIX = ".dcp"
SHARDED_STATE = "state.pt"  # in a .dcp directory, beside DCP's files: the state that is not sharded
SHARDED_KEYS = ("model", "optimizer")


def atomic_torch_save(obj: Any, path: Path) -> None:
    """torch.save with a checksum footer (harness/state/checksums.py), atomically."""
    def write(f: IO[bytes]) -> None:
        checked = ChecksumWriter(f)
        try:
            torch.save(obj, checked)
        except RuntimeError:  # torch's writer reports a failed write as its own error: tell the OSError
            if checked.error is not None:
                raise checked.error from None
            raise
        f.write(checked.footer())

    atomic_write(path, write)


def copy_checkpoint(source: Path, target: Path) -> None:
    """Copy a checkpoint (a .pt file or a .dcp directory) under a temporary name, fsync and verify
    the copy, then rename it into place: a kill mid-copy leaves no torn checkpoint under `target`."""
    tmp = target.with_name(f".{target.name}.tmp")  # a stale temp name: removed at the next start
    remove_path(tmp)
    try:
        if source.is_dir():
            shutil.copytree(source, tmp)
        else:
            shutil.copy2(source, tmp)
        for path in [tmp, *tmp.rglob("*")] if tmp.is_dir() else [tmp]:
            fsync_dir(path) if path.is_dir() else fsync_file(path)
        problem = checkpoint_problem(tmp)
        if problem is not None:
            raise WriteError(f"the copy of {source} to {target} is {problem}")
        os.replace(tmp, target)
        fsync_dir(target.parent)
    except OSError as err:
        raise write_error(target, err) from None
    finally:
        remove_path(tmp)


def rng_state() -> dict[str, Any]:
    """Every RNG's state in types `torch.load`'s default `weights_only=True` reads (numpy's key array
    as a tensor), so a checkpoint opens in plain torch."""
    kind, keys, position, has_gauss, cached = np.random.get_state()
    numpy_state = {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "position": int(position),
                   "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}
    state = {"python": random.getstate(), "numpy": numpy_state, "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    numpy_state = state["numpy"]
    if isinstance(numpy_state, dict):
        numpy_state = (numpy_state["kind"], numpy_state["keys"].numpy().astype(np.uint32), numpy_state["position"],
                       numpy_state["has_gauss"], numpy_state["cached_gaussian"])
    np.random.set_state(numpy_state)  # a tuple: a checkpoint written before the state was plain
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def step_checkpoints(run_dir: Path) -> list[Path]:
    """Step checkpoints of a run (.pt files, or .dcp directories of a sharded run), newest first."""
    found = [p for p in (run_dir / CKPT_DIR).glob("step_*") if STEP_PATTERN.search(p.name)]
    return sorted(found, key=step_of, reverse=True)


def step_of(path: Path) -> int:
    """The step a step checkpoint holds, from its name (step_00000400.pt: 400)."""
    return int(STEP_PATTERN.search(path.name).group(1))


def save_step_checkpoint(state: dict[str, Any], run_dir: Path, step: int, keep_last: int) -> Path:
    path = run_dir / CKPT_DIR / f"step_{step:08d}.pt"
    atomic_torch_save(state, path)
    for old in step_checkpoints(run_dir)[max(keep_last, 1):]:
        old.unlink(missing_ok=True)
    return path


def save_best_checkpoint(state: dict[str, Any], run_dir: Path) -> Path:
    path = run_dir / CKPT_DIR / "best.pt"
    atomic_torch_save(state, path)
    return path


class CheckpointWriter(Protocol):
    """Writes the trainer's state as a step or best checkpoint; every rank calls it."""

    def step(self, state: dict[str, Any], run_dir: Path, step: int, keep_last: int) -> None: ...

    def best(self, state: dict[str, Any], run_dir: Path) -> None: ...


class FileCheckpoints:
    """One .pt file per checkpoint, written by rank 0 (every rank holds the whole state)."""

    def __init__(self, dist_info: DistInfo) -> None:
        self.dist = dist_info

    def step(self, state: dict[str, Any], run_dir: Path, step: int, keep_last: int) -> None:
        on_main_then_agree(self.dist, lambda: save_step_checkpoint(state, run_dir, step, keep_last))

    def best(self, state: dict[str, Any], run_dir: Path) -> None:
        on_main_then_agree(self.dist, lambda: save_best_checkpoint(state, run_dir))


def on_main_then_agree(dist_info: DistInfo, write: Callable[[], object]) -> None:
    """Rank 0 writes; a write that failed there stops every rank with the same one line (the others
    would otherwise wait at the next collective until a timeout, with tracebacks)."""
    error = None
    if dist_info.is_main:
        try:
            write()
        except WriteError as err:
            error = err
    raise_if_any_failed(error, dist_info)


def raise_if_any_failed(error: WriteError | None, dist_info: DistInfo) -> None:
    """Raise on every rank when the write failed on any (a collective where several ranks write)."""
    if dist_info.enabled:
        messages = [m for m in all_gather_objects(None if error is None else str(error), dist_info) if m]
        if messages:
            raise WriteError(messages[0])
    elif error is not None:
        raise error


@dataclass(frozen=True)
class Shards:
    """A sharded checkpoint's model or optimizer entry: read into the live objects, by every rank
    (harness/state/sharded_checkpoint.py)."""

    path: Path
    key: str


def is_sharded_checkpoint(path: Path) -> bool:
    """A sharded run's checkpoint: a .dcp directory (finished or not: load_checkpoint tells)."""
    return path.suffix == SHARDED_SUFFIX and path.is_dir()


def load_checkpoint(path: Path) -> dict[str, Any]:
    """A .pt checkpoint, or a .dcp directory's unsharded state with `Shards` for its sharded entries."""
    if path.is_dir():
        if not (path / ".metadata").is_file():
            raise FileNotFoundError(f"{path} is not a finished sharded checkpoint (no .metadata)")
        return {**_load(path / SHARDED_STATE), **{key: Shards(path, key) for key in SHARDED_KEYS}}
    return _load(path)


def _load(path: Path) -> dict[str, Any]:
    # weights_only=False: the state holds RNG tuples and numpy arrays, and these files are our own.
    return torch.load(path, map_location="cpu", weights_only=False)


def checkpoint_problem(path: Path) -> str | None:
    """Why a checkpoint cannot be trusted, checked from its sizes and checksums without loading it
    (None: it is whole, as far as what was written with it can tell)."""
    if not path.exists():
        return "missing (a broken best.dcp link)" if path.is_symlink() else "missing"
    if not path.is_dir():
        return footer_problem(path)
    if not (path / ".metadata").is_file():
        return "unfinished (no .metadata)"
    if not (path / SHARDED_STATE).is_file():
        return f"unfinished (no {SHARDED_STATE})"
    return manifest_problem(path) or footer_problem(path / SHARDED_STATE)


def verified_checkpoint(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the loaded checkpoint, None), or (None, why it was passed over)."""
    problem = checkpoint_problem(path)
    if problem is None:
        try:
            return load_checkpoint(path), None
        except Exception as err:  # noqa: BLE001 - any unreadable file means "try the previous one"
            problem = f"unreadable ({one_line(err, 160)})"
    return None, problem


def best_checkpoints(run_dir: Path) -> list[Path]:
    """The run's best checkpoint as it is on disk: best.pt, or a sharded run's best.dcp link (a
    broken link included, so that a resume can say so)."""
    folder = run_dir / CKPT_DIR
    return [p for p in (folder / "best.pt", folder / BEST_LINK) if p.exists() or p.is_symlink()]


def resume_candidates(run_dir: Path) -> list[Path]:
    """Where a resume may start, in the order tried: the step checkpoints newest first, then the
    best checkpoint (best.pt, or best.dcp of a sharded run) when every step checkpoint failed."""
    return [*step_checkpoints(run_dir), *best_checkpoints(run_dir)]


def latest_valid_checkpoint(run_dir: Path, skipped: Callable[[Path, str], None] | None = None
                            ) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that verifies and loads; each one passed over is told to `skipped`
    with the reason."""
    for path in resume_candidates(run_dir):
        state, problem = verified_checkpoint(path)
        if state is not None:
            return path, state
        if skipped is not None:
            skipped(path, problem)
    return None
