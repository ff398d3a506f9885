"""Train a model: `python train.py optim=adamw clip=1.0` (docs/configuration.md lists every group and key)."""
from __future__ import annotations

import os
import sys

import hydra
from omegaconf import DictConfig

from harness.entry.cli import (
    check_group_choices,
    check_overrides,
    check_run_dir,
    composition_errors_in_one_line,
    exit_without_teardown,
    fail,
    is_multirun,
    leave_run_dir_as_found,
    parse_command_line,
    with_saved_overrides,
    write_errors_in_one_line,
)
from harness.core.errors import HarnessError
from harness.launch.single import launched_elsewhere
from harness.launch.torchrun import relaunch_if_asked
from harness.entry.mode_probe import skip_mode_probe
from harness.entry.parent_death import die_with_launcher
from harness.entry.resolvers import register_resolvers

register_resolvers()
# Your own modules (model._target_=mymodels.Net) are importable from where you started train.py,
# as `python -m` would allow; appended, so they never shadow an installed package.
if os.getcwd() not in sys.path:
    sys.path.append(os.getcwd())


@hydra.main(version_base="1.3", config_path="conf", config_name="train")
def main(cfg: DictConfig) -> float | list[float]:
    from harness.loop.signals import EXIT_INTERRUPTED, interrupted_by_user
    from harness.modes.run import run

    try:
        elsewhere = launched_elsewhere(cfg)  # hydra/launcher=slurm: the run becomes one SLURM job
        if elsewhere is not None:
            sys.exit(elsewhere)
        result = run(cfg)
    except HarnessError as err:
        fail(err, cleanup_hydra_dir=True)
    if cfg.mode == "doctor" and result:
        sys.exit(1)  # the doctor found failing checks; its table says which and how to fix them
    if not is_multirun():  # everything is written and closed; skip the second of module teardown
        leave_run_dir_as_found()
        exit_without_teardown(EXIT_INTERRUPTED if interrupted_by_user() else 0)
    return result


if __name__ == "__main__":
    die_with_launcher()
    command = with_saved_overrides(parse_command_line(sys.argv[1:]))
    sys.argv[1:] = command.argv  # Hydra reads its flags only before the overrides
    check_group_choices(command)
    check_overrides(command.overrides)
    if command.runs_job:
        check_run_dir(command)
        relaunch_if_asked(sys.argv)
        skip_mode_probe(command)
    with write_errors_in_one_line(command), composition_errors_in_one_line(command.overrides):
        main()
