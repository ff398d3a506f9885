"""Command-line front door: turn bad input into one line and a non-zero exit, not a traceback."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import NoReturn

from harness.errors import ConfigError, HarnessError

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
HYDRA_FILES = {".hydra", "train.log"}
EXIT_CONFIG_ERROR = 2


def group_options(group: str) -> list[str] | None:
    """Options of a config group (a folder under conf/, or a group Hydra's plugins register,
    like hydra/sweeper/sampler), or None if `group` is not one."""
    folder = CONF_DIR / group
    options = set()
    if folder.is_dir():
        options |= {p.relative_to(folder).with_suffix("").as_posix() for p in folder.rglob("*.yaml")}
    if group.startswith("hydra/"):
        options |= _registered_options(group)
    return sorted(options) if options else None


def _registered_options(group: str) -> set[str]:
    from hydra.core.config_store import ConfigStore
    from hydra.core.plugins import Plugins

    Plugins.instance()  # imports every plugin, which registers its configs
    try:
        return {name.removesuffix(".yaml") for name in ConfigStore.instance().list(group) if name.endswith(".yaml")}
    except OSError:  # not a registered group
        return set()


def check_group_choices(argv: list[str]) -> None:
    """Hydra reports an unknown option over several lines; name it in one, before Hydra starts."""
    for arg in argv:
        if "=" not in arg or arg.startswith(("-", "~", "hydra.")):
            continue
        key, value = arg.lstrip("+").split("=", 1)
        options = group_options(key)
        if options is None or "(" in value or value == "null":
            continue
        for choice in value.split(","):
            if choice not in options:
                fail(ConfigError(key, choice, f"one of {options}"))


def fail(err: HarnessError, cleanup_hydra_dir: bool = False) -> NoReturn:
    """Print `error: ...` on one line and exit 2; drop a run dir holding nothing but Hydra's files."""
    print(f"error: {err}", file=sys.stderr)
    if cleanup_hydra_dir:
        _remove_empty_run_dir()
    sys.exit(EXIT_CONFIG_ERROR)


def _remove_empty_run_dir() -> None:
    from hydra.core.hydra_config import HydraConfig

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= HYDRA_FILES:
        shutil.rmtree(run_dir, ignore_errors=True)
