"""Users' own callbacks: the `callbacks` config node holds named entries, each a `_target_` and its
arguments (`callbacks.my_log._target_=mymod.MyLog callbacks.my_log.every=10`); an entry set to
null is off. A callback subclasses harness.loop.callbacks.base.Callback (or defines its hooks)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.core.callables import call, check_accepts, locate
from harness.loop.callbacks.base import HOOKS
from harness.core.errors import ConfigError



@dataclass(frozen=True)
class CallbackSpec:
    """One entry of the `callbacks` node, checked: the class its `_target_` names and its arguments."""

    path: str
    target: Callable[..., Any]
    kwargs: dict[str, Any]


def validate_callbacks_config(node: Any) -> dict[str, CallbackSpec]:
    """name -> its spec, in the order the config lists them; entries set to null are left out."""
    if node is None:
        return {}
    if not isinstance(node, (Mapping, DictConfig)):
        raise ConfigError("callbacks", node, "named entries, e.g. +callbacks.my_log._target_=mymod.MyLog")
    specs = {}
    for name, entry in node.items():
        if entry is None:
            continue
        if not isinstance(entry, (Mapping, DictConfig)) or "_target_" not in entry:
            raise ConfigError(f"callbacks.{name}", entry, "a node with a _target_ (a callback class) and its "
                                                          "arguments, or null to turn it off")
        plain = OmegaConf.to_container(entry, resolve=True) if isinstance(entry, DictConfig) else dict(entry)
        path = plain.pop("_target_")
        specs[str(name)] = CallbackSpec(path, locate(f"callbacks.{name}._target_", path), plain)
    return specs


def build_user_callbacks(specs: dict[str, CallbackSpec]) -> dict[str, Any]:
    """name -> the callback object, in the order the config lists them."""
    built = {}
    for name, spec in specs.items():
        key, path, target, kwargs = f"callbacks.{name}._target_", spec.path, spec.target, spec.kwargs
        check_accepts(target, kwargs, f"callbacks.{name}", path)
        callback = call(target, kwargs, key, path, "a callback that builds")
        if not any(callable(getattr(callback, hook, None)) for hook in HOOKS):
            raise ConfigError(key, path, f"a callback: an object with at least one of the hooks {list(HOOKS)} "
                                         f"(subclass harness.loop.callbacks.base.Callback)")
        built[str(name)] = callback
    return built
