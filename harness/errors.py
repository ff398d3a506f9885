"""User-facing errors: one line that names the key, the bad value and what is allowed."""
from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A configuration value that cannot work; raised before any training starts."""

    def __init__(self, key: str, value: Any, allowed: str) -> None:
        self.key, self.value, self.allowed = key, value, allowed
        super().__init__(f"{key}={value!r} is invalid: {allowed}")
