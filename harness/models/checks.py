"""Checks every model Config shares; each problem is (key, value, what is allowed)."""
from __future__ import annotations

from harness.core.typed_config import Problem

__all__ = ["Problem", "size_and_dropout_problems"]


def size_and_dropout_problems(config: object, size_keys: tuple[str, ...]) -> list[Problem]:
    problems: list[Problem] = [(k, getattr(config, k), "an integer >= 1") for k in size_keys if getattr(config, k) < 1]
    if not 0.0 <= config.dropout < 1.0:
        problems.append(("dropout", config.dropout, "a number in [0, 1)"))
    return problems
