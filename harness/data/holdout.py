"""The held-out test split of built-in data (`data.test_fraction`): cut from the training side, so
validation never changes and a fraction of 0 leaves both splits exactly as they were."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from harness.core.errors import ConfigError

Cut = TypeVar("Cut", bound=Sequence[Any])  # arrays, tensors, token files and text all slice alike


def cut_tail(items: Cut, count: int) -> tuple[Cut, Cut]:
    """(head, the last `count` items)."""
    return items[: len(items) - count], items[len(items) - count :]


def test_size(fraction: float | None, total: int, taken: int, minimum: int = 1, unit: str = "samples") -> int:
    """How many of `total` samples (or tokens) data.test_fraction (`fraction`) holds out; `taken`
    are validation's already. The test split and what is left to train on must each hold `minimum`."""
    fraction = fraction or 0
    count = int(total * float(fraction))
    if fraction and (count < minimum or total - taken - count < minimum):
        raise ConfigError("data.test_fraction", fraction,
                          f"0 (no test split) or a fraction whose test split and remaining training split each "
                          f"hold at least {minimum} {unit}: of {total}, it holds out {count} and leaves "
                          f"{total - taken - count} to train on")
    return count
