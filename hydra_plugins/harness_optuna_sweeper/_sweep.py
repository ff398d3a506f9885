"""One sweep from start to end: settings -> search space -> study -> trial loop -> the best trial's
test scores -> report."""
from __future__ import annotations

import logging
import shutil
import sys
from pathlib import Path
from typing import Any, Callable

from hydra.core.config_loader import ConfigLoader
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import ConfigCompositionException, OverrideParseException
import optuna
from optuna.trial import FrozenTrial
from omegaconf import DictConfig, OmegaConf

from harness.core.errors import ConfigError
from hydra_plugins.harness_optuna_sweeper import _ledger, _report
from harness.launch.app import app_command
from hydra_plugins.harness_optuna_sweeper._loop import TrialLoop, trial_dir
from hydra_plugins.harness_optuna_sweeper._settings import SweepSettings, parse_settings
from hydra_plugins.harness_optuna_sweeper._space import SearchSpace, parse_search_space
from hydra_plugins.harness_optuna_sweeper._study import check_directions, objective_names, open_study, storage_url
from hydra_plugins.harness_optuna_sweeper._test_best import score_best_trial
from harness.launch.runner import TrialRunner

log = logging.getLogger(__name__)
EXIT_INTERRUPTED = 130


def run_sweep(cfg: DictConfig, options: dict[str, Any], config_loader: ConfigLoader, arguments: list[str],
              validate: Callable[[list[list[str]]], None], trial_runner: Callable[[int], Any]) -> dict[str, Any]:
    """`validate` composes a batch of trial overrides (Hydra's check); `trial_runner(n_jobs)` gives
    what runs the trials. Plain values, so this module never imports the sweeper class back."""
    settings = parse_settings(options)
    parser = OverridesParser.create(config_loader=config_loader)
    space = parse_search_space(parser.parse_overrides([*settings.params, *arguments]))
    _check_composes(validate, space.overrides(space.first()))
    runner = trial_runner(settings.n_jobs)  # before anything is written: a launcher it cannot drive is refused
    target = len(space.grid()) if settings.is_grid else settings.n_trials

    sweep_dir = Path(cfg.hydra.runtime.cwd, str(cfg.hydra.sweep.dir)).resolve()
    url = storage_url(settings, sweep_dir)
    check_directions(cfg, objective_names(cfg), settings.directions)
    study, rejoin = _open_or_leave_nothing(settings, space, sweep_dir, str(cfg.hydra.job.name), target,
                                           objective_names(cfg), runner)
    OmegaConf.save(cfg, sweep_dir / "multirun.yaml")  # only once the sweep is accepted
    log.info("study '%s' in %s: %d/%d trials done, %d job(s); resume with the same command "
             "and hydra.sweep.dir=%s", study.study_name, _report.display_url(url),
             _ledger.progress(study).done, target, settings.n_jobs, sweep_dir)

    n_jobs = runner.capacity(settings.n_jobs)
    if n_jobs < settings.n_jobs:
        log.info("n_jobs=%d requested; %d trial(s) fit the free GPUs at once", settings.n_jobs, n_jobs)
    app = app_command(cfg)
    loop = TrialLoop(
        study=study, space=space, runner=runner,
        app=app, sweep_dir=sweep_dir, n_jobs=n_jobs, target=target,
        grid=settings.is_grid, storage_url=url, pruner_spec=settings.pruner_spec(), rejoin=rejoin,
    )
    if not loop.run():
        _report.write_report(study, sweep_dir, url, plots=False, tensorboard=False)
        log.warning("sweep stopped; rerun the same command to resume study '%s'", study.study_name)
        sys.exit(EXIT_INTERRUPTED)
    if settings.test_best:
        score_best_trial(study, app, sweep_dir)
    summary = _report.write_report(study, sweep_dir, url, plots=settings.plots,
                                   tensorboard=settings.tensorboard)
    log.info("%s", _report.best_line(summary))
    return summary


def _open_or_leave_nothing(settings: SweepSettings, space: SearchSpace, sweep_dir: Path, job_name: str,
                           target: int, objectives: tuple[str, ...], runner: TrialRunner
                           ) -> tuple[optuna.Study, list[FrozenTrial]]:
    """The study, caught up with trials a killed sweeper left (with those still running, to wait
    for); a refused sweep leaves the disk as it was (a sweep dir it had to create is removed again)."""
    created = not sweep_dir.exists()
    sweep_dir.mkdir(parents=True, exist_ok=True)
    try:
        study = open_study(settings, space, sweep_dir, job_name, objectives)
        rejoin = _catch_up(study, settings, space, target, sweep_dir, runner)
    except ConfigError:
        if created:
            shutil.rmtree(sweep_dir, ignore_errors=True)
        raise
    return study, rejoin


def _catch_up(study: optuna.Study, settings: SweepSettings, space: SearchSpace, target: int, sweep_dir: Path,
              runner: TrialRunner) -> list[FrozenTrial]:
    """Bring a found study up to this run: take over what a killed sweep left running (waited
    for when its runner can, else closed), queue the grid combinations still owed, record what
    the report needs."""
    rejoin, lost = _ledger.take_over_orphans(study, lambda t: runner.can_rejoin(trial_dir(sweep_dir, t)))
    if lost:
        log.warning("trials %s were left running by a killed sweep: marked FAIL (interrupted)", lost)
    if rejoin:
        log.info("trials %s were left running by a killed sweep and still have their jobs: waiting for them",
                 [t.number for t in rejoin])
    if settings.is_grid:
        queued = _ledger.enqueue_missing_grid(study, space)
        log.info("grid: %d combinations, %d still to run", target, queued)
    study.set_user_attr(_ledger.STUDY_SEARCH_SPACE, space.describe())
    study.set_user_attr(_ledger.STUDY_N_TRIALS, target)
    return rejoin


def _check_composes(validate: Callable[[list[list[str]]], None], overrides: list[str]) -> None:
    """Compose one trial's config now: a typo in a key fails here, once, instead of in every
    trial process."""
    try:
        validate([overrides])
    except (ConfigCompositionException, OverrideParseException) as err:
        # Hydra explains over several lines; its unindented ones carry the message.
        lines = [ln.strip() for ln in str(err).strip().splitlines() if not ln.startswith(" ")]
        raise ConfigError("search space", " ".join(overrides), " ".join(lines[:3])) from err
