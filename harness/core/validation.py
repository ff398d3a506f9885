"""The type tests config checks share. YAML's `true` is an int to isinstance (bool subclasses int),
so `trainer.max_steps=true` would pass a plain isinstance(value, int) as 1."""
from __future__ import annotations


def is_whole(value: object) -> bool:
    """An int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    """An int or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)
