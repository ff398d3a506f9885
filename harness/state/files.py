"""Writing files so that a reader sees the old one or the new one, never a torn one, and removing
paths whatever they are: the file helpers checkpoints, summaries, metrics and reports share."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from harness.core.errors import write_error


def atomic_write(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write through `write` to a temporary file beside `path`, fsync it, rename it over `path`
    and fsync the directory: readers see the old file or the new one, never a torn one. A write
    that fails (a full disk) removes its temporary file and raises WriteError naming `path`."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.fchmod(fd, 0o666 & ~process_umask())  # mkstemp's 0600 would hide the file from the user's group
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)  # make the rename itself durable
    except OSError as err:
        raise write_error(path, err) from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)  # gone already when the rename happened


def process_umask() -> int:
    """The process umask, read without changing it where /proc shows it (setting it to read it back
    races with other threads creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync_dir(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def fsync_file(path: Path) -> None:
    with path.open("rb") as f:
        os.fsync(f.fileno())


def atomic_json_dump(obj: Any, path: Path) -> None:
    atomic_write(path, lambda f: f.write(json.dumps(obj, indent=2).encode()))


def remove_path(path: Path) -> None:
    """A file, a link (not what it points to) or a folder, gone; nothing if it is already gone."""
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink(missing_ok=True)
