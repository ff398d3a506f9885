"""A refused command leaves an existing run dir as it found it. Hydra writes `.hydra/` and the job's
log into the run dir, and the run lock its holder, before the harness has read the config, so a
command the harness then refuses (a resume that would jump the LR, an eval of a missing
checkpoint, a bad key) would otherwise have rewritten a finished run's saved overrides, which
every later `resume=auto` and `mode=eval` there reads. The snapshot holds those files' bytes and
times, taken before Hydra runs; a command the harness did not accept puts them back. Acceptance is
said by the harness itself (`accept_command`), never read off the dir, where a finished run's
background plotter or a user's own tools may be writing at the same moment."""
from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HYDRA_SUBDIR = ".hydra"


@dataclass(frozen=True)
class Saved:
    data: bytes
    atime_ns: int
    mtime_ns: int


@dataclass(frozen=True)
class RunDirSnapshot:
    run_dir: Path
    written_first: Callable[[str], bool]  # the top-level names Hydra and the lock write before the harness runs
    before_hydra: dict[Path, Saved]  # those files as they were

    @classmethod
    def take(cls, run_dir: Path, written_first: Callable[[str], bool]) -> RunDirSnapshot:
        return cls(run_dir, written_first, {f: _read(f) for f in _files_written_first(run_dir, written_first)})

    def restore(self) -> None:
        """Put the saved files back as they were (bytes and times); remove the ones the refused
        command created among Hydra's and the lock's."""
        for f in _files_written_first(self.run_dir, self.written_first):
            if f not in self.before_hydra:
                f.unlink()
        for path, saved in self.before_hydra.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(saved.data)
            os.utime(path, ns=(saved.atime_ns, saved.mtime_ns))


_accepted = False  # set once this process's command has passed every check and starts its own record


def accept_command() -> None:
    """The command passed every check and writes its own record from here (a training run after
    its build, an eval's result, the doctor's or the LR finder's report): the files Hydra wrote for
    it stay, even if it later fails."""
    global _accepted
    _accepted = True


def command_accepted() -> bool:
    return _accepted


def _files_written_first(run_dir: Path, written_first: Callable[[str], bool]) -> list[Path]:
    """The files (those inside `.hydra/` included) under the run dir's top-level names `written_first` picks."""
    found = []
    for path in run_dir.iterdir():
        if written_first(path.name):
            found += sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
    return found


def _read(path: Path) -> Saved:
    stat = path.stat()
    return Saved(path.read_bytes(), stat.st_atime_ns, stat.st_mtime_ns)
