"""User-facing errors: one line that says what is wrong and what would work."""
from __future__ import annotations

from typing import Any


class HarnessError(Exception):
    """A problem the user can fix; printed as one line (`error: ...`), exit status 2."""


class ConfigError(HarnessError, ValueError):
    """A configuration value that cannot work; raised before any training starts."""

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}={value!r} is invalid: {allowed}")


class DataError(HarnessError):
    """A sample or batch that could not be read while training; the checkpoints written so far stay valid."""


def one_line(err: BaseException, limit: int = 300) -> str:
    """`Type: message` on one line, for errors raised by user code."""
    text = " ".join(str(err).split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
