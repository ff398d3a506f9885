"""Find or create the sweep's study: where it is stored, what it is called, its sampler."""
from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Sequence

import optuna
from omegaconf import DictConfig, OmegaConf
from sqlalchemy.engine import make_url

from harness.core.errors import ConfigError
from harness.loop.callbacks.sweep_trial import build_pruner, open_storage
from hydra_plugins.harness_optuna_sweeper._settings import SAMPLERS, SweepSettings
from hydra_plugins.harness_optuna_sweeper._space import SearchSpace

STORAGE_FILE = "optuna.db"
DIGEST_CHARS = 6  # of the search-space fingerprint in a default study name
PLAIN_NAME = re.compile(r"[\w.+\-/]+")  # a study name that needs no quoting on a command line


def storage_url(settings: SweepSettings, sweep_dir: Path) -> str:
    """The study's storage. A relative sqlite path is made absolute: a trial may run in its
    own directory (hydra.job.chdir=true) and must still report to the same file."""
    if settings.storage is None:
        return f"sqlite:///{sweep_dir / STORAGE_FILE}"
    url = make_url(settings.storage)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return settings.storage
    return url.set(database=str(Path(url.database).resolve())).render_as_string(
        hide_password=False)


def objective_names(cfg: DictConfig) -> tuple[str, ...]:
    """The app's `objective` key (the summary.json field(s) a trial returns): null is the best of the
    harness's `trainer.monitor`; () for an app without either."""
    from harness.training.metrics.monitored import default_objectives

    value, monitor = cfg.get("objective"), OmegaConf.select(cfg, "trainer.monitor")
    if value is None and monitor is None:
        return ()
    return default_objectives(value, str(monitor))


def check_directions(cfg: DictConfig, objectives: Sequence[str], directions: Sequence[str]) -> None:
    """An objective of the harness's (best_val_f1) whose direction is known from the config must be
    swept that way: refused in one line before any trial, as a trial would refuse it."""
    from harness.training.metrics.monitored import check_direction, may_log, objective_metric
    from harness.training.metrics.spec import validate_metrics_config

    logged = may_log(validate_metrics_config(cfg.get("metrics")))
    for objective, direction in zip(objectives, directions):
        name = objective_metric(objective, logged)
        if name is not None:
            check_direction(objective, name, logged[name], direction)


def study_name(settings: SweepSettings, job_name: str, space: SearchSpace,
               objectives: Sequence[str]) -> str:
    """Readable (`train over clip, optim.lr [3f2a9c]`: the job, the searched keys, a short hash)
    and stable across reruns of the same command: the hash covers what defines the study (search
    space, fixed overrides, directions, objectives), not n_trials, n_jobs or the sampler, so a
    rerun with a larger n_trials extends the study instead of starting another."""
    if settings.study_name:
        return settings.study_name
    searched = ", ".join(sorted(p.name for p in space.params))
    return f"{job_name} over {searched} [{_digest(settings, space, objectives)}]"


def _earlier_name(settings: SweepSettings, job_name: str, space: SearchSpace, objectives: Sequence[str]) -> str:
    """The default name sweeps were given before it read as words: their studies resume under it."""
    searched = "+".join(sorted(p.name for p in space.params))
    return f"{job_name}-{searched}-{_digest(settings, space, objectives)}"


def _digest(settings: SweepSettings, space: SearchSpace, objectives: Sequence[str]) -> str:
    return space.fingerprint(*settings.directions, *objectives)[:DIGEST_CHARS]


def name_override(name: str) -> str:
    """`hydra.sweeper.study_name=NAME` as it pastes into a shell: quoted for Hydra and the shell
    where the name holds spaces or brackets."""
    return f"\"hydra.sweeper.study_name='{name}'\"" if not PLAIN_NAME.fullmatch(name) else \
        f"hydra.sweeper.study_name={name}"


def open_study(settings: SweepSettings, space: SearchSpace, sweep_dir: Path, job_name: str,
               objectives: Sequence[str] = ()) -> optuna.Study:
    """Create or resume the study; `objectives` (see objective_names) become its metric names,
    which optuna-dashboard and the report show instead of "Objective 0"."""
    if objectives and len(objectives) != len(settings.directions):
        raise ConfigError("objective", list(objectives),
                          f"one summary field per hydra.sweeper.direction {list(settings.directions)}")
    url = storage_url(settings, sweep_dir)
    name = study_name(settings, job_name, space, objectives)
    storage = open_storage(url)
    existing = optuna.get_all_study_names(storage=storage)
    earlier = None if settings.study_name else _earlier_name(settings, job_name, space, objectives)
    if earlier in existing:
        name = earlier
    if settings.storage is None:
        _refuse_foreign_study(existing, name, sweep_dir)
    study = optuna.create_study(
        storage=storage,
        study_name=name,
        directions=[optuna.study.StudyDirection[d.upper()] for d in settings.directions],
        pruner=build_pruner(settings.pruner_spec()),
        load_if_exists=True,
    )
    found = tuple(d.name.lower() for d in study.directions)
    if found != settings.directions:
        raise ConfigError(
            "hydra.sweeper.direction", list(settings.directions),
            f"study '{name}' was created with {list(found)}; keep that or set another "
            "hydra.sweeper.study_name",
        )
    if objectives:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(list(objectives))
    study.sampler = build_sampler(settings, n_existing=len(study.get_trials(deepcopy=False)))
    return study


def _refuse_foreign_study(existing: Sequence[str], name: str, sweep_dir: Path) -> None:
    """Trial dirs are named by trial number, so two studies in one sweep dir would overwrite
    each other's runs."""
    others = [n for n in existing if n != name]
    if others:
        raise ConfigError(
            "hydra.sweep.dir", str(sweep_dir),
            f"it already holds study '{others[0]}' from a different search; use a new "
            f"hydra.sweep.dir, or {name_override(others[0])} to continue that study",
        )


def build_sampler(settings: SweepSettings, n_existing: int) -> optuna.samplers.BaseSampler:
    """The configured sampler, seeded so that proposals are reproducible.

    A resumed study must not replay the proposals it already made, so the seed is offset by
    the number of trials the study holds. QMC is the exception: it finds its place in the
    sequence from the storage and needs the same scramble seed to continue it.
    """
    kwargs = dict(settings.sampler.kwargs)
    if settings.seed is not None:
        offset = 0 if settings.sampler.name == "qmc" else n_existing
        kwargs["seed"] = settings.seed + offset
    cls = getattr(optuna.samplers, SAMPLERS[settings.sampler.name][0])
    with warnings.catch_warnings():
        # QMC and some options are flagged experimental: the user chose them on purpose.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return cls(**kwargs)
