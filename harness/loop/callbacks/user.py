"""Users' own callbacks: the `callbacks` config node holds named entries, each a `_target_` and its
arguments (`callbacks.my_log._target_=mymod.MyLog callbacks.my_log.every=10`); an entry set to
null is off. A callback subclasses harness.loop.callbacks.base.Callback (or defines its hooks)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.core.callables import call, check_accepts, locate
from harness.loop.callbacks.base import HOOKS
from harness.core.errors import ConfigError



def validate_callbacks_config(node: Any) -> None:
    if node is None:
        return
    if not isinstance(node, (Mapping, DictConfig)):
        raise ConfigError("callbacks", node, "named entries, e.g. +callbacks.my_log._target_=mymod.MyLog")
    for name, entry in node.items():
        if entry is None:
            continue
        if not isinstance(entry, (Mapping, DictConfig)) or "_target_" not in entry:
            raise ConfigError(f"callbacks.{name}", entry, "a node with a _target_ (a callback class) and its "
                                                          "arguments, or null to turn it off")
        locate(f"callbacks.{name}._target_", entry["_target_"])


def build_user_callbacks(node: Any) -> dict[str, Any]:
    """name -> the callback object, in the order the config lists them."""
    built = {}
    for name, entry in (node or {}).items():
        if entry is None:
            continue
        key, path = f"callbacks.{name}._target_", entry["_target_"]
        target = locate(key, path)
        kwargs = {k: v for k, v in OmegaConf.to_container(entry, resolve=True).items() if k != "_target_"}
        check_accepts(target, kwargs, f"callbacks.{name}", path)
        callback = call(target, kwargs, key, path, "a callback that builds")
        if not any(callable(getattr(callback, hook, None)) for hook in HOOKS):
            raise ConfigError(key, path, f"a callback: an object with at least one of the hooks {list(HOOKS)} "
                                         f"(subclass harness.loop.callbacks.base.Callback)")
        built[str(name)] = callback
    return built
