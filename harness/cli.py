"""Command-line front door: turn bad input into one line and a non-zero exit, not a traceback."""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from harness.errors import ConfigError, HarnessError
from harness.rundir import claim_run_dir

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


def is_multirun() -> bool:
    """Whether this process is a Hydra multirun (a sweep driving jobs), not one run."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.get().mode == RunMode.MULTIRUN


def exit_without_teardown() -> NoReturn:
    """End a finished single run now. Its files are written, fsynced and closed, its workers and
    process group are gone; what is left is the interpreter tearing down torch's thousands of
    modules, over a second on 2 cores that a short sweep trial would spend doing nothing."""
    logging.shutdown()  # flushes train.log
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _remove_empty_run_dir() -> None:
    from hydra.core.hydra_config import HydraConfig

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if run_dir.is_dir() and {p.name for p in run_dir.iterdir()} <= HYDRA_FILES:
        shutil.rmtree(run_dir, ignore_errors=True)


def check_run_dir(argv: list[str]) -> None:
    """Before Hydra writes .hydra/ and train.log into an explicit run dir, make sure it does not
    hold an earlier run's results (run() checks again, with the fully composed config)."""
    if "-m" in argv or "--multirun" in argv or os.environ.get("RANK", "0") != "0":
        return
    given = dict(arg.lstrip("+").split("=", 1) for arg in argv if "=" in arg and not arg.startswith("-"))
    if "hydra.run.dir" not in given:
        return
    run_dir = Path(given["hydra.run.dir"])
    existed = run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)  # Hydra would fail here with a traceback
    except OSError as err:
        fail(ConfigError("hydra.run.dir", str(run_dir), f"a directory that can be created: {err.strerror}"))
    if not existed:
        run_dir.rmdir()  # only checked: an override Hydra then refuses must leave nothing behind
    if given.get("overwrite", "false").lower() == "true":
        return
    try:
        claim_run_dir(run_dir, given.get("resume"), overwrite=False)
    except ConfigError as err:
        fail(err)


def check_overrides(argv: list[str]) -> None:
    """Hydra reports a bad override over several lines with exit 1: parse every override (sweep
    syntax included) up front, so a syntax error is one line. Composition errors (a key that does
    not exist) surface from Hydra's own composition: see `composition_errors_in_one_line`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in (a for a in argv if not a.startswith("-")):
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as err:
            key, _, value = arg.partition("=")
            fail(ConfigError(key, value, f"Hydra's override syntax ({str(err).splitlines()[0]}); "
                                         f"see README, Search-space syntax"))


@contextlib.contextmanager
def composition_errors_in_one_line(argv: list[str]) -> Iterator[None]:
    """Let Hydra's composition errors propagate (HYDRA_FULL_ERROR) instead of being printed over
    several lines with exit 1, and tell them as one ConfigError naming the override. Composing
    once more up front to catch them would cost every run a quarter of a second."""
    from hydra.errors import HydraException

    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    except HydraException as err:
        fail(_composition_error(" ".join(str(err).split()), [a for a in argv if not a.startswith("-")]))


def _composition_error(message: str, overrides: list[str]) -> ConfigError:
    """The override Hydra's message names, with the message's advice, as one ConfigError."""
    for arg in overrides:
        key, _, value = arg.lstrip("+~").partition("=")
        if f"'{key}'" in message:
            if message.startswith("Could not override"):
                return ConfigError(key, value, f"a key that exists in the config (to add a new key, write +{key}={value})")
            if message.startswith("Could not append"):
                return ConfigError(key, value, f"a new key: {key} already exists (drop the +, or write ++{key}={value})")
            return ConfigError(key, value, message)
    return ConfigError("overrides", " ".join(overrides), message)
