"""One way to check a config node: a dataclass whose fields carry their own checks.

A component declares its settings as a dataclass (torchtitan's nested Config idea) and each field
says, beside its default, what it allows: `setting(128, "an integer >= 1", at_least(1))`. The
field's type annotation is checked first (an `int` is a whole number that is not a bool, a
`float` any number, `X | None` also takes null), then its own check, then the dataclass's
`problems()` for rules across fields. Every failure is one ConfigError naming `prefix.key`, the
value and the field's `allowed` text. Keys nothing reads are refused by config_keys.py, which knows the options' files.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf

from harness.core.errors import ConfigError
from harness.core.validation import is_number, is_whole

Problem = tuple[str, object, str]  # (key, value, what is allowed)
T = TypeVar("T")


def setting(default: Any, allowed: str, ok: Callable[[Any], bool] | None = None) -> Any:
    """A field with its check: `ok(value)` on a value of the right type, and the text that names
    what is allowed (used for a wrong type too)."""
    return dataclasses.field(default=default, metadata={"allowed": allowed, "ok": ok})


def at_least(low: float) -> Callable[[Any], bool]:
    return lambda value: value >= low


def within(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> Callable[[Any], bool]:
    """A range check: [low, high], either end open when asked."""
    return lambda value: (value > low if low_open else value >= low) and (value < high if high_open else value <= high)


def one_of(choices: tuple[Any, ...]) -> Callable[[Any], bool]:
    return lambda value: value in choices


_TYPE_CHECKS: dict[Any, Callable[[Any], bool]] = {
    int: is_whole, float: is_number, bool: lambda v: isinstance(v, bool), str: lambda v: isinstance(v, str),
    list: lambda v: isinstance(v, list),
}


_TYPE_NAMES = {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list"}


def _describe(annotation: Any) -> str:
    """What a field without its own `allowed` text takes, from its type alone."""
    members = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union,
                                                                              types.UnionType) else (annotation,)
    names = [_TYPE_NAMES.get(m, getattr(m, "__name__", str(m))) for m in members if m is not type(None)]
    return ("null or " if type(None) in members else "") + " or ".join(names)


def _accepts(annotation: Any, value: Any) -> bool:
    """Whether `value` has the annotated type (`X | None` and Optional[X] take None too)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_accepts(member, value) for member in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    check = _TYPE_CHECKS.get(annotation)
    return check(value) if check is not None else True


def read_typed(node: Mapping[str, Any] | DictConfig | None, schema: type[T], prefix: str,
               only_known_keys: bool = False) -> T:
    """`node`'s keys checked into `schema`; absent keys take the field's default. Keys the schema
    lacks are config_keys.py's to judge (an option of the user's own may add some); a node no file
    defines (a model's Config) sets `only_known_keys` to refuse them here."""
    plain: dict[str, Any] = {}
    if node is not None:
        plain = OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else dict(node)
    hints = typing.get_type_hints(schema)
    for key, value in plain.items() if only_known_keys else ():
        if key not in hints:
            raise ConfigError(f"{prefix}.{key}", value, f"a key of {list(hints)}")
    values = {}
    for f in dataclasses.fields(schema):  # type: ignore[arg-type]
        value = plain.get(f.name, f.default if f.default is not dataclasses.MISSING else f.default_factory())
        allowed, ok = f.metadata.get("allowed") or _describe(hints[f.name]), f.metadata.get("ok")
        if not _accepts(hints[f.name], value) or (value is not None and ok is not None and not ok(value)):
            raise ConfigError(f"{prefix}.{f.name}", value, allowed)
        if hints[f.name] in (float, float | None) and is_number(value):
            value = float(value)
        values[f.name] = value
    settings = schema(**values)
    for key, value, allowed in getattr(settings, "problems", lambda: [])():
        raise ConfigError(f"{prefix}.{key}", value, allowed)
    return settings
