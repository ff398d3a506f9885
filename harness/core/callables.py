"""Import and call the user's own code (`model._target_`, `data._target_`, `data.collate_fn`) so that
every way it can go wrong ends in one line naming the key, the callable and what it takes."""
from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

from harness.core.errors import ConfigError, one_line

SHOWN_ARGS = 120  # characters of the arguments quoted in an error line
WHERE_MODULES_ARE = "modules are found in the directory train.py was started from and on PYTHONPATH"


def locate(key: str, path: object) -> Any:
    """The object a dotted path names; a missing module, a module that fails to import and a
    missing attribute are three different messages."""
    if not isinstance(path, str) or not path or "." not in path:
        raise ConfigError(key, path, f"a dotted path to a class or function, e.g. mypkg.models.Net ({WHERE_MODULES_ARE})")
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name and (module_name == err.name or module_name.startswith(err.name + ".")):
                continue  # this prefix is not a module; try a shorter one
            raise ConfigError(key, path, f"a module that imports: importing {module_name} raised {one_line(err)}") from None
        except Exception as err:  # noqa: BLE001 - the user's module raised while being imported
            raise ConfigError(key, path, f"a module that imports: importing {module_name} raised {one_line(err)}") from None
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                raise ConfigError(key, path, f"a name defined in {module_name}: it has no {'.'.join(parts[cut:])}")
            obj = getattr(obj, attr)
        return obj
    raise ConfigError(key, path, f"an importable class or function: no module {parts[0]!r} ({WHERE_MODULES_ARE})")


def parameters(target: Any) -> tuple[list[str], bool]:
    """The keyword names `target` takes, and whether it also takes **kwargs."""
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # some builtins have no signature: take anything
        return [], True
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    return names, any(p.kind is p.VAR_KEYWORD for p in params)


def check_accepts(target: Any, kwargs: Mapping[str, Any], prefix: str, path: str) -> None:
    """A key the user set that the callable does not take fails here, listing what it takes."""
    names, var_kw = parameters(target)
    if var_kw:
        return
    for key, value in kwargs.items():
        if key not in names:
            raise ConfigError(f"{prefix}.{key}", value, f"a parameter of {path}, which takes {names}")


def accepted_fields(target: Any, fields: Mapping[str, Any]) -> dict[str, Any]:
    """The data facts (vocab_size, in_features, ...) that the callable's signature names."""
    names, _ = parameters(target)
    return {k: v for k, v in fields.items() if k in names}


def call(target: Any, kwargs: Mapping[str, Any], key: str, path: str, what: str) -> Any:
    """`target(**kwargs)`; an exception becomes one line naming the callable and its arguments."""
    try:
        return target(**kwargs)
    except Exception as err:  # noqa: BLE001 - whatever the user's code raises
        shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        shown = shown if len(shown) <= SHOWN_ARGS else shown[: SHOWN_ARGS - 3] + "..."
        raise ConfigError(key, path, f"{what}: {path.rsplit('.', 1)[-1]}({shown}) raised "
                                     f"{one_line(err)}").in_user_code(err) from None
