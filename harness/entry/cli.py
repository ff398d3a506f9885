"""Command-line front door: turn bad input into one line and a non-zero exit, not a traceback."""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import re
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from harness.core.config_keys import CONF_DIR, PER_INVOCATION, missing_key_hint
from harness.core.errors import DISK_ERRNOS, ConfigError, HarnessError, RunDirBusy, WriteError, write_error
from harness.entry.elastic_error import tell_torchrun
from harness.state.run_dir_snapshot import RunDirSnapshot, command_accepted
from harness.state.run_lock import LOCK_FILE, hold_run_dir, release_all
from harness.state.rundir import claim_run_dir

ROOT = Path(__file__).resolve().parents[2]
HYDRA_FILES = {".hydra", LOCK_FILE}
JOB_LOG = re.compile(r"(train|eval)(_rank\d+)?\.log")  # Hydra's job log: train.log, eval.log (mode=eval), per rank
SHELL_COMPLETION = ("install", "uninstall", "query")  # -sc takes one of these as an override
_created_run_dir: Path | None = None  # the explicit run dir this command made: removed again if it is refused
_snapshot: RunDirSnapshot | None = None  # an existing run dir this command holds, as it was before Hydra wrote


@dataclass(frozen=True)
class CommandLine:
    """train.py's arguments as Hydra's own argparse reads them: its flags take their value as the
    next word or after `=`, anywhere among the overrides."""

    overrides: list[str]
    multirun: bool = False
    runs_job: bool = True  # False for --cfg, --info, --help, --hydra-help, --shell-completion: nothing trains
    config_dirs: tuple[Path, ...] = (CONF_DIR,)  # where config groups are looked up (-cp, -cd, hydra.searchpath)
    other_sources: bool = False  # a pkg:// search path: groups this check cannot list
    argv: list[str] = field(default_factory=list)  # flags first, then the overrides (see _flags_first)

    def given(self) -> dict[str, str]:
        """KEY -> VALUE of the `KEY=VALUE` overrides (`+` dropped), a quoted value without its quotes
        as Hydra reads it (`hydra.run.dir='runs/a b'` is the folder `runs/a b`)."""
        return dict(_key_and_text(arg) for arg in self.overrides if "=" in arg)


def _key_and_text(arg: str) -> tuple[str, str]:
    key, text = arg.lstrip("+").split("=", 1)
    if text[:1] in ("'", '"'):
        from hydra.core.override_parser.overrides_parser import OverridesParser

        try:
            value = OverridesParser.create().parse_overrides([arg])[0].value()
        except Exception:  # noqa: BLE001 - a bad override is check_overrides' to report
            return key, text
        if isinstance(value, str):
            return key, value
    return key, text


class _OneLineArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        fail(ConfigError("command line", " ".join(sys.argv[1:]), f"{message} (python train.py --hydra-help "
                                                                  f"lists Hydra's flags)"))


def parse_command_line(argv: list[str]) -> CommandLine:
    """Read the command line with Hydra's parser (a bad flag is one line); --version and --help-like
    flags that print and exit are left for Hydra to answer."""
    from hydra._internal.utils import get_args_parser

    parser = get_args_parser()
    parser.__class__ = _OneLineArgumentParser
    if "--version" in argv:
        return CommandLine([], runs_job=False, argv=["--version"])
    args = parser.parse_intermixed_args(argv)  # Hydra's own parse_args stops at the first flag after an override
    modes = [flag for flag, on in (("--run", args.run), ("--multirun", args.multirun), ("--cfg", args.cfg),
                                   ("--info", args.info), ("--shell-completion", args.shell_completion)) if on]
    if len(modes) > 1:
        parser.error(f"{' and '.join(modes)} together: only one of --run, --multirun, --cfg, --info and "
                     f"--shell-completion can be given")
    if args.shell_completion and not any(o.split("=", 1)[0] in SHELL_COMPLETION for o in args.overrides):
        parser.error(f"--shell-completion without a subcommand: add one of "
                     f"{', '.join(f'{c}=SHELL' for c in SHELL_COMPLETION)} (e.g. -sc install=bash)")
    if args.experimental_rerun and not Path(args.experimental_rerun).is_file():
        parser.error(f"--experimental-rerun {args.experimental_rerun}: no such file (a config.pickle that a run "
                     f"saved with Hydra's save_job_info callback)")
    dirs = [Path(args.config_path) if Path(args.config_path).is_absolute() else ROOT / args.config_path] \
        if args.config_path else [CONF_DIR]
    if args.config_dir:
        dirs.append(Path(args.config_dir).expanduser().resolve())
    paths = _search_paths(args.overrides)
    dirs += [Path(p.removeprefix("file://")) for p in paths if p.startswith("file://")]
    prints_only = bool(args.cfg or args.info or args.help or args.hydra_help or args.shell_completion)
    return CommandLine(args.overrides, args.multirun, not prints_only, tuple(dirs),
                       any(not p.startswith("file://") for p in paths), _flags_first(args))


def _flags_first(args: argparse.Namespace) -> list[str]:
    """The same command with its flags before its overrides, the one order Hydra's parser reads."""
    switches = {"--help": args.help, "--hydra-help": args.hydra_help, "--resolve": args.resolve, "--run": args.run,
                "--multirun": args.multirun, "--shell-completion": args.shell_completion}
    valued = {"--cfg": args.cfg, "--package": args.package, "--config-path": args.config_path,
              "--config-name": args.config_name, "--config-dir": args.config_dir,
              "--experimental-rerun": args.experimental_rerun, "--info": args.info}
    return ([flag for flag, on in switches.items() if on]
            + [f"{flag}={value}" for flag, value in valued.items() if value is not None] + args.overrides)


def _search_paths(overrides: list[str]) -> list[str]:
    """The entries of a `hydra.searchpath=[...]` override (another way to add config groups)."""
    for arg in overrides:
        key, _, value = arg.lstrip("+").partition("=")
        if key == "hydra.searchpath":
            return [v.strip().strip("'\"") for v in value.strip("[]").split(",") if v.strip()]
    return []


def group_options(group: str, config_dirs: tuple[Path, ...] = (CONF_DIR,)) -> list[str] | None:
    """Options of a config group (a folder under any config dir, or a group Hydra's plugins register,
    like hydra/sweeper/sampler), or None if `group` is not one."""
    options = set()
    for root in config_dirs:
        folder = root / group
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


def check_group_choices(command: CommandLine) -> None:
    """Hydra reports an unknown option over several lines; name it in one, before Hydra starts."""
    if command.other_sources:
        return  # options may come from a package this check cannot list: Hydra's own error decides
    for arg in command.overrides:
        if "=" not in arg or arg.startswith(("~", "hydra.")):
            continue
        key, value = arg.lstrip("+").split("=", 1)
        options = group_options(key, command.config_dirs)
        if options is None or "(" in value or value == "null":
            continue
        if value.startswith("[") and value.endswith("]"):  # several options of one group: logger=[a,b]
            value = value[1:-1]
        for choice in filter(None, (c.strip() for c in value.split(","))):
            if choice not in options:
                fail(ConfigError(key, choice, f"one of {options}"))


def fail(err: HarnessError, cleanup_hydra_dir: bool = False) -> NoReturn:
    """Print `error: ...` on one line and exit 2 (1 for a failed write); drop a run dir holding
    nothing but Hydra's files, unless it belongs to the run that holds it."""
    tell_torchrun(f"error: {err}")
    if os.environ.get("RANK", "0") == "0" or not _said_by_rank_zero(err):
        print(f"error: {err}", file=sys.stderr)
        if err.frames:  # raised in the user's own code: where, in their files
            print(f"{err.frames}\n(the frames above are in your code; train.log keeps them)", file=sys.stderr)
    if err.frames and cleanup_hydra_dir:
        _log_to_run_dir(err)
    elif not isinstance(err, RunDirBusy):
        if cleanup_hydra_dir:
            _remove_empty_run_dir(Path(_hydra_output_dir()))
        if _created_run_dir is not None:
            _remove_empty_run_dir(_created_run_dir)
    release_all()
    leave_run_dir_as_found()
    sys.exit(err.exit_status)


def leave_run_dir_as_found() -> None:
    """A command the harness did not accept into an existing run dir (refused, or a resume of a run
    already complete) puts back what Hydra and the lock wrote there: the run's saved overrides stay
    those of the commands that trained it."""
    # a run dir that held only Hydra's files is gone (fail removed it): nothing to put back there
    if _snapshot is not None and _snapshot.run_dir.is_dir() and not command_accepted():
        release_all()  # the lock's release rewrites .lock: put back after it
        _snapshot.restore()


def _said_by_rank_zero(err: HarnessError) -> bool:
    """Errors every rank meets alike (a config check, a write all ranks agreed failed, a run dir
    another run holds): rank 0 says them once. A rank's own (its data, its callback) it says itself."""
    return isinstance(err, (ConfigError, WriteError))


def is_multirun() -> bool:
    """Whether this process is a Hydra multirun (a sweep driving jobs), not one run."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    return HydraConfig.get().mode == RunMode.MULTIRUN


def exit_without_teardown(status: int = 0) -> NoReturn:
    """End a finished single run now. Its files are written, fsynced and closed, its workers and
    process group are gone; what is left is the interpreter tearing down torch's thousands of
    modules, over a second on 2 cores that a short sweep trial would spend doing nothing."""
    logging.shutdown()  # flushes train.log
    release_all()  # the run dir's lock (os._exit skips atexit)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _log_to_run_dir(err: HarnessError) -> None:
    """The error and the user's frames in train.log, which stays (with its run dir) to be read."""
    record = logging.LogRecord("harness", logging.ERROR, __file__, 0, "%s\n%s", (err, err.frames), None)
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):  # the console has printed it already
            handler.handle(record)


def _hydra_output_dir() -> str:
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get().runtime.output_dir


def _written_first(name: str) -> bool:
    """A top-level name of a run dir that Hydra or the run lock writes before the harness reads the config."""
    return name in HYDRA_FILES or JOB_LOG.fullmatch(name) is not None


def _remove_empty_run_dir(run_dir: Path) -> None:
    """A refused run leaves nothing: a run dir holding only Hydra's files (.hydra/, the job's log and,
    under torchrun, the other ranks' logs) goes."""
    if run_dir.is_dir() and all(_written_first(p.name) for p in run_dir.iterdir()):
        release_all()  # its lock file goes with it
        shutil.rmtree(run_dir, ignore_errors=True)


def check_run_dir(command: CommandLine) -> None:
    """Before Hydra writes .hydra/ and train.log into an explicit run dir, make sure it does not
    hold an earlier run's results (run() checks again, with the fully composed config)."""
    if command.multirun or not command.runs_job or os.environ.get("RANK", "0") != "0":
        return
    given = command.given()
    if "hydra.run.dir" not in given:
        return
    run_dir = Path(given["hydra.run.dir"])
    if given.get("overwrite", "false").lower() != "true" and given.get("mode") != "eval":
        try:
            claim_run_dir(run_dir, given.get("resume"), overwrite=False)  # reads only: a refusal touches nothing
        except ConfigError as err:
            fail(err)
    global _created_run_dir, _snapshot
    existed = run_dir.exists()
    snapshot = RunDirSnapshot.take(run_dir, _written_first) if existed and run_dir.is_dir() else None
    try:
        hold_run_dir(run_dir)  # before Hydra writes .hydra/ and train.log: a second run must not touch them
    except RunDirBusy as err:
        fail(err)
    except OSError as err:  # Hydra would fail here with a traceback
        fail(ConfigError("hydra.run.dir", str(run_dir), f"a directory that can be created: {err.strerror}"))
    _snapshot = snapshot  # this command holds the run dir now: a refusal puts back what it touched
    if not existed:
        _created_run_dir = run_dir  # a command refused from here on leaves nothing behind


EVAL_OWN_FILES = ["hydra.output_subdir=null", "hydra.job.name=eval"]  # eval.log; the run's .hydra/ untouched


def with_saved_overrides(command: CommandLine) -> CommandLine:
    """`resume=auto` into a run dir continues that run as it was started, and `mode=eval` scores it
    as it was built: its saved overrides (.hydra/overrides.yaml) come first and the command's own
    win, so no override needs repeating. A first start (no saved overrides) is left as it is."""
    given = command.given()
    evaluating = given.get("mode") == "eval"
    if evaluating and not command.multirun:
        command = dataclasses.replace(command, overrides=[*command.overrides, *EVAL_OWN_FILES],
                                      argv=[*command.argv, *EVAL_OWN_FILES])
    if not (given.get("resume") == "auto" or evaluating) or "hydra.run.dir" not in given or command.multirun:
        return command
    saved_file = _saved_overrides(Path(given["hydra.run.dir"]), evaluating)
    if not saved_file.is_file():
        return command
    import yaml

    try:
        saved = [str(o) for o in yaml.safe_load(saved_file.read_text()) or []]
    except (yaml.YAMLError, TypeError):
        return command
    typed = {_override_key(arg) for arg in command.overrides}
    skipped = (*PER_INVOCATION, "parallel") if evaluating else PER_INVOCATION  # an eval runs in one process
    carried = [arg for arg in saved if not _covered(_override_key(arg), typed) and _override_key(arg) not in skipped]
    # `~KEY` undoes the saved overrides that added KEY (or keys below it): both go
    undone = {arg for arg in command.overrides
              if arg.startswith("~") and any(_covered(_override_key(s), {_override_key(arg)}) for s in saved)}
    if not carried and not undone:
        return command
    if os.environ.get("RANK", "0") == "0" and carried:
        print(f"{'mode=eval' if evaluating else 'resume=auto'}: with the run's own overrides from {saved_file}: "
              f"{' '.join(carried)}", flush=True)
    flags = command.argv[:len(command.argv) - len(command.overrides)]
    overrides = [*carried, *(arg for arg in command.overrides if arg not in undone)]
    return dataclasses.replace(command, overrides=overrides, argv=[*flags, *overrides])


def _saved_overrides(run_dir: Path, evaluating: bool) -> Path:
    """The run dir's .hydra/overrides.yaml. An attempt of diagnose.remedy=auto (RUN_DIR/attempts/N)
    has none of its own: an eval there reads its run's, and mode=eval adds the attempt's remedies."""
    own = run_dir / ".hydra" / "overrides.yaml"
    if own.is_file() or not evaluating:
        return own
    from harness.remedy.story import ATTEMPTS

    return run_dir.parent.parent / ".hydra" / "overrides.yaml" if run_dir.parent.name == ATTEMPTS else own


def _override_key(arg: str) -> str:
    return arg.lstrip("+~").split("=", 1)[0]


def _covered(key: str, typed: set[str]) -> bool:
    """Whether a typed key replaces `key`: the same key, or a node above it."""
    return any(key == t or key.startswith(f"{t}.") for t in typed)


def check_overrides(overrides: list[str]) -> None:
    """Hydra reports a bad override over several lines with exit 1: parse every override (sweep
    syntax included) up front, so a syntax error is one line. Composition errors (a key that does
    not exist) surface from Hydra's own composition: see `composition_errors_in_one_line`."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in overrides:
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as err:
            key, _, value = arg.partition("=")
            fail(ConfigError(key, value, f"Hydra's override syntax ({str(err).splitlines()[0]}); "
                                         f"see docs/sweeps.md, Search-space syntax"))


@contextlib.contextmanager
def composition_errors_in_one_line(overrides: list[str]) -> Iterator[None]:
    """Let Hydra's composition errors propagate (HYDRA_FULL_ERROR) instead of being printed over
    several lines with exit 1, and tell them as one ConfigError naming the override. Composing
    once more up front to catch them would cost every run a quarter of a second."""
    from hydra.errors import HydraException

    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        yield
    except HydraException as err:
        fail(_composition_error(" ".join(str(err).split()), overrides))


@contextlib.contextmanager
def write_errors_in_one_line(command: CommandLine) -> Iterator[None]:
    """A full disk, a quota or a read-only mount met anywhere (Hydra's own .hydra/ files included)
    is one line naming the file (its folder when the error does not say), exit 1, not a traceback."""
    try:
        yield
    except OSError as err:
        if err.errno not in DISK_ERRNOS:
            raise
        run_dir = command.given().get("hydra.run.dir", "the run directory")
        fail(write_error(err.filename or f"a file in {run_dir}", err))


def _composition_error(message: str, overrides: list[str]) -> ConfigError:
    """The override Hydra's message names, with the message's advice, as one ConfigError."""
    for arg in overrides:
        key, _, value = arg.lstrip("+~").partition("=")
        if f"'{key}'" in message or message.startswith(f"Multiple values for {key}."):
            if message.startswith("Could not override"):
                return ConfigError(key, value, f"a key that exists in the config ({missing_key_hint(key, value)})")
            if message.startswith(f"Multiple values for {key}"):
                return ConfigError(arg.partition("=")[0], value, f"{key} is already in the defaults list: choose it "
                                                                 f"with {key}={value} (no +)")
            if message.startswith("Could not append"):
                return ConfigError(key, value, f"a new key: {key} already exists (drop the +, or write ++{key}={value})")
            return ConfigError(key, value, message)
    return ConfigError("overrides", " ".join(overrides), message)
