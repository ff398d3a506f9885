"""Structured configs of the Optuna sweeper, registered in Hydra's ConfigStore.

Registering them here (instead of shipping yaml) makes `hydra/sweeper=optuna` and
`hydra/sweeper/sampler=...` work in any app that has this plugin on its path, and lets Hydra
type-check `hydra.sweeper.*` overrides before the sweep starts. Fields left at `None` mean
"Optuna's own default", so a newer Optuna keeps its tuned defaults.

Hydra imports this module while scanning plugins at every app start: keep it free of optuna.
No `from __future__ import annotations`: the scanner runs the module before it is in
sys.modules, and dataclasses then fail to resolve string annotations.
"""

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


# --- samplers: `name` picks the algorithm, the other fields are its arguments ---------------
@dataclass
class TPESamplerConf:
    name: str = "tpe"
    n_startup_trials: int = 10  # random trials before the model kicks in
    multivariate: Optional[bool] = None  # model parameter interactions
    group: bool = False  # needs multivariate; for conditional spaces
    constant_liar: Optional[bool] = None  # avoids proposing what running trials already test


@dataclass
class RandomSamplerConf:
    name: str = "random"


@dataclass
class GridSamplerConf:
    """Every combination of the choice/range parameters exactly once; n_trials is ignored."""

    name: str = "grid"


@dataclass
class GPSamplerConf:
    """Gaussian-process Bayesian optimisation; needs scipy (and torch)."""

    name: str = "gp"
    n_startup_trials: int = 10
    deterministic_objective: bool = False  # true when reruns give identical values


@dataclass
class CmaEsSamplerConf:
    """CMA-ES for continuous spaces; needs the `cmaes` package. Single objective only."""

    name: str = "cmaes"
    n_startup_trials: int = 1
    sigma0: Optional[float] = None
    popsize: Optional[int] = None
    use_separable_cma: bool = False
    with_margin: bool = False  # keeps integer/discrete parameters from collapsing
    consider_pruned_trials: bool = False


@dataclass
class QMCSamplerConf:
    """Quasi-random low-discrepancy points; needs scipy."""

    name: str = "qmc"
    qmc_type: str = "sobol"  # sobol | halton
    # Unscrambled Sobol starts at the lower corner of every range: a poor first trial.
    scramble: bool = True


@dataclass
class NSGAIISamplerConf:
    """Genetic multi-objective search; keeps the Pareto front diverse."""

    name: str = "nsga2"
    population_size: int = 50
    mutation_prob: Optional[float] = None
    crossover_prob: float = 0.9
    swapping_prob: float = 0.5


# --- pruners: the trial process asks them after each reported eval ---------------------------
@dataclass
class NopPrunerConf:
    name: str = "none"


@dataclass
class MedianPrunerConf:
    """Prune when the trial is worse than the median of earlier trials at the same step."""

    name: str = "median"
    n_startup_trials: int = 5  # finished trials before anything is pruned
    n_warmup_steps: int = 0  # steps (as reported) before a trial may be pruned
    interval_steps: int = 1
    n_min_trials: int = 1


@dataclass
class PercentilePrunerConf:
    name: str = "percentile"
    percentile: float = 25.0  # keep the best 25% at each step
    n_startup_trials: int = 5
    n_warmup_steps: int = 0
    interval_steps: int = 1
    n_min_trials: int = 1


@dataclass
class SuccessiveHalvingPrunerConf:
    name: str = "successive_halving"
    min_resource: Any = "auto"  # steps before the first rung; "auto" estimates it
    reduction_factor: int = 4
    min_early_stopping_rate: int = 0
    bootstrap_count: int = 0


@dataclass
class HyperbandPrunerConf:
    name: str = "hyperband"
    min_resource: int = 1
    max_resource: Any = "auto"  # steps of a full trial; "auto" takes it from finished trials
    reduction_factor: int = 3
    bootstrap_count: int = 0


# --- trial runner: how one trial process is started (the torchrun seam) ---------------------
@dataclass
class SubprocessRunnerConf:
    _target_: str = "harness.launch.runner.TrialRunner"
    grace_s: float = 10.0  # after SIGTERM, wait this long (a checkpoint save) before SIGKILL
    timeout_s: Optional[float] = None  # kill a trial running longer; it becomes FAIL "timeout"


@dataclass
class OptunaSweeperConf:
    _target_: str = "hydra_plugins.harness_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    defaults: List[Any] = field(
        default_factory=lambda: [
            {"sampler": "tpe"},
            {"pruner": "none"},
            {"runner": "subprocess"},
            "_self_",
        ]
    )
    sampler: Any = MISSING
    pruner: Any = MISSING
    runner: Any = MISSING
    # "minimize" | "maximize", or a list of them for multi-objective sweeps.
    direction: Any = "minimize"
    n_trials: int = 20  # finished trials (COMPLETE + PRUNED + FAIL) the study ends with
    n_jobs: int = 1  # trials kept running at the same time
    seed: Optional[int] = None  # makes proposals reproducible (with n_jobs=1)
    # Any SQLAlchemy URL; null = sqlite file `optuna.db` in hydra.sweep.dir.
    storage: Optional[str] = None
    # null = "<job name>-<hash of search space, fixed overrides and directions>", so the
    # identical command finds its study again.
    study_name: Optional[str] = None
    # Search space from config, e.g. {optim.lr: "tag(log, interval(1e-4, 1e-2))"}; the command
    # line adds to it and wins on the same key.
    params: Optional[Dict[str, Any]] = None
    plots: bool = True  # PNGs from optuna.visualization.matplotlib in the sweep dir
    tensorboard: bool = True  # every trial's hparams + metrics in <sweep dir>/tb_hparams
    # After the sweep, score the best trial's best checkpoint on its test split (the app's
    # mode=eval), when its data holds one; kept as the study's `best_trial_test` user attr.
    test_best: bool = True


_SAMPLERS = {
    "tpe": TPESamplerConf,
    "random": RandomSamplerConf,
    "grid": GridSamplerConf,
    "gp": GPSamplerConf,
    "cmaes": CmaEsSamplerConf,
    "qmc": QMCSamplerConf,
    "nsga2": NSGAIISamplerConf,
}
_PRUNERS = {
    "none": NopPrunerConf,
    "median": MedianPrunerConf,
    "percentile": PercentilePrunerConf,
    "successive_halving": SuccessiveHalvingPrunerConf,
    "hyperband": HyperbandPrunerConf,
}


def _register() -> None:
    cs = ConfigStore.instance()
    provider = "harness_optuna_sweeper"
    cs.store(group="hydra/sweeper", name="optuna", node=OptunaSweeperConf, provider=provider)
    for name, node in _SAMPLERS.items():
        cs.store(group="hydra/sweeper/sampler", name=name, node=node, provider=provider)
    for name, node in _PRUNERS.items():
        cs.store(group="hydra/sweeper/pruner", name=name, node=node, provider=provider)
    cs.store(
        group="hydra/sweeper/runner", name="subprocess", node=SubprocessRunnerConf, provider=provider
    )


_register()
