"""Start-up: skip Hydra's second composition of the config when the command line alone decides the mode.

Before it runs a job, Hydra composes the whole config once only to read `hydra.mode`, then again
to run it: about 0.14 s of a ~0.5 s start, paid by every run and every sweep trial. `hydra.mode`
matters only when something other than `-m` asks for a sweep: a config file that sets it to
MULTIRUN, or a `hydra.mode=` override. When neither can be the case (no YAML file on the search
path names MULTIRUN, no such override, no pkg:// search path this check cannot read), the answer
is known without composing, and Hydra is told so.
"""
from __future__ import annotations

from pathlib import Path

from harness.entry.cli import CommandLine

MODE_KEY = "hydra.mode"
MAX_SCANNED = 500  # YAML files read per search path (this project's conf/ holds ~80)


def mode_decided_by_command_line(command: CommandLine) -> bool:
    """True when no config file or override can set hydra.mode, so `-m` alone picks run or sweep."""
    if command.other_sources or any(arg.lstrip("+~").startswith(MODE_KEY) for arg in command.overrides):
        return False
    return not any(_names_multirun(directory) for directory in command.config_dirs)


def _names_multirun(directory: Path) -> bool:
    """Whether a YAML file under `directory` names MULTIRUN; a search path too large to read quickly
    (a project root holding runs' .hydra/ files) counts as one that may, and Hydra's probe runs."""
    for count, path in enumerate(directory.rglob("*.yaml")):
        if count >= MAX_SCANNED or "MULTIRUN" in path.read_text(errors="replace"):
            return True
    return False


def skip_mode_probe(command: CommandLine) -> None:
    """Let Hydra take the mode from `-m` (its answer when no config sets one) without composing first."""
    if not mode_decided_by_command_line(command):
        return
    from hydra._internal.hydra import Hydra

    Hydra.get_mode = lambda self, config_name, overrides: None
