"""One run per directory: a run, a resume and each rank of a multi-process run hold a lock on the
run directory for as long as they write into it.

RUN_DIR/.lock carries POSIX record locks (fcntl.lockf), one byte per rank: rank r holds byte r.
The kernel drops a lock the moment its holder exits, however it dies (kill -9 included), so a
lock is never stale in the kernel's eyes, and locks work across the hosts of a shared file system.
The file's text names rank 0's holder (pid, host, start, command): a refusal quotes it, and a
text left by a holder that died tells the next run it took the directory over.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from harness.core.errors import RunDirBusy

LOCK_FILE = ".lock"
log = logging.getLogger("harness")

_held: dict[Path, tuple[int, int]] = {}  # this process's locks: resolved run dir -> (fd, rank)


def hold_run_dir(run_dir: Path, rank: int = 0) -> bool:
    """Lock `run_dir` (created if missing) for this rank; False when this process holds it already.
    Raises RunDirBusy when another live process holds it."""
    key = run_dir.resolve()
    if key in _held:
        return False
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, rank)
    except OSError:
        holder = _describe(_read(fd))
        os.close(fd)
        who = f"rank {rank} of another run" if rank else "another run"
        raise RunDirBusy("hydra.run.dir", str(run_dir),
                         f"a directory no other run writes into: {who} holds it ({holder}); wait for it to end, "
                         f"stop it, or choose another hydra.run.dir") from None
    if rank == 0:
        earlier = _read(fd)
        if earlier and earlier.get("pid") != os.getpid():
            log.warning("took over %s from %s, which ended without releasing it", run_dir, _describe(earlier))
        _write(fd, {"pid": os.getpid(), "host": socket.gethostname(),
                    "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)[:300]})
    _held[key] = (fd, rank)
    return True


def release_run_dir(run_dir: Path) -> None:
    """Let go of `run_dir`: rank 0 clears the holder's text, so the next run starts without a word."""
    fd, rank = _held.pop(run_dir.resolve(), (None, 0))
    if fd is None:
        return
    if rank == 0:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
    os.close(fd)  # drops the lock


def release_all() -> None:
    for run_dir in list(_held):
        release_run_dir(run_dir)


atexit.register(release_all)


@contextlib.contextmanager
def run_dir_held(run_dir: Path, rank: int = 0) -> Iterator[None]:
    """Hold `run_dir` for a block; when the block took the lock it lets go at the end, and removes
    the directory again when it made it and nothing else was written into it."""
    existed = run_dir.exists()
    taken = hold_run_dir(run_dir, rank)
    try:
        yield
    finally:
        if taken:
            release_run_dir(run_dir)
            if not existed and [p.name for p in run_dir.iterdir()] == [LOCK_FILE]:
                (run_dir / LOCK_FILE).unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    run_dir.rmdir()


def _read(fd: int) -> dict:
    try:
        return json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}


def _write(fd: int, holder: dict) -> None:
    """The holder's name; the lock holds without it (a full disk may refuse the text)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(holder).encode(), 0)


def _describe(holder: dict) -> str:
    if not holder:
        return "a process that has not written its name yet"
    return (f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('started')}: "
            f"{holder.get('command', '?')}")
