"""User-facing errors: one line that says what is wrong and what would work."""
from __future__ import annotations

import errno
import os
import sys
import traceback
from pathlib import Path
from typing import Any


class HarnessError(Exception):
    """A problem the user can fix; printed as one line (`error: ...`), exit status 2. One raised by
    the user's own code (model, dataset, collate, callback) also carries that code's frames."""

    exit_status = 2
    frames = ""  # `File "...", line N, in f` lines of the user's own files, printed under the line

    def in_user_code(self, cause: BaseException) -> HarnessError:
        """Keep the frames of `cause`'s traceback that lie in the user's own files."""
        self.frames = user_frames(cause)
        return self


class ConfigError(HarnessError, ValueError):
    """A configuration value that cannot work; raised before any training starts."""

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        shown = str(value).lower() if isinstance(value, bool) else repr(value)  # as typed: true, not True
        super().__init__(f"{key}={shown} is invalid: {allowed}")


class DataError(HarnessError):
    """A sample or batch that could not be read while training; the checkpoints written so far stay valid."""


class WriteError(HarnessError):
    """A file of the run could not be written (a full disk, a quota, a read-only mount): the run
    stops; the checkpoints written before it stay valid. Exit status 1: not a mistake in the command."""

    exit_status = 1




class Interrupted(HarnessError):
    """Ctrl-C during a command that writes nothing until it is done (mode=eval): one line, exit 130."""

    exit_status = 130


class RunDirBusy(ConfigError):
    """Another live process holds the run directory: this one must not write into it."""


DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG}  # the file system refused a write


def write_error(path: Path | str, err: OSError) -> WriteError:
    """`could not write PATH: No space left on device (ENOSPC)`, with what to do next."""
    name = errno.errorcode.get(err.errno, str(err.errno)) if err.errno else type(err).__name__
    reason = err.strerror or os.strerror(err.errno or 0) or str(err)
    return WriteError(f"could not write {path}: {reason} ({name}); the checkpoints written before it are "
                      f"intact: free space (or fix the mount), then resume=auto")


HARNESS_DIR = Path(__file__).resolve().parents[1]
NOT_USER_CODE = tuple(str(p) for p in {HARNESS_DIR, HARNESS_DIR.parent / "hydra_plugins", HARNESS_DIR.parent / "train.py",
                                      Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()})


def user_frames(err: BaseException, limit: int = 8) -> str:
    """The frames of `err`'s traceback in the user's own files (not this project's, an installed
    package's or the standard library's), as Python prints them, innermost last."""
    frames = [frame for frame in traceback.extract_tb(err.__traceback__)
              if not frame.filename.startswith("<") and "site-packages" not in frame.filename
              and not str(Path(frame.filename).resolve()).startswith(NOT_USER_CODE)]
    return "".join(traceback.format_list(frames[-limit:])).rstrip("\n")


def one_line(err: BaseException, limit: int = 300) -> str:
    """`Type: message` on one line, for errors raised by user code."""
    text = " ".join(str(err).split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
