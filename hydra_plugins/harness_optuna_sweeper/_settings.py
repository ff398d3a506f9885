"""`hydra.sweeper.*` checked once, before any trial: each mistake is one line naming the key."""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from omegaconf import DictConfig, ListConfig, OmegaConf

from harness.core.errors import ConfigError
from harness.core.validation import is_whole

DIRECTIONS = ("minimize", "maximize")
# sampler name -> (optuna class, packages it needs beyond optuna)
SAMPLERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "tpe": ("TPESampler", ()),
    "random": ("RandomSampler", ()),
    # Grid trials are all enqueued with fixed parameters, so the sampler is never consulted.
    # optuna's GridSampler cannot be used: it calls study.stop(), which raises outside optimize().
    "grid": ("RandomSampler", ()),
    "gp": ("GPSampler", ("scipy", "torch")),
    "cmaes": ("CmaEsSampler", ("cmaes",)),
    "qmc": ("QMCSampler", ("scipy",)),
    "nsga2": ("NSGAIISampler", ()),
}
SINGLE_OBJECTIVE_SAMPLERS = frozenset({"cmaes"})
PRUNERS = {
    "none": "NopPruner",
    "median": "MedianPruner",
    "percentile": "PercentilePruner",
    "successive_halving": "SuccessiveHalvingPruner",
    "hyperband": "HyperbandPruner",
}


@dataclass(frozen=True)
class Algorithm:
    """A sampler or pruner: its short name and the keyword arguments for its optuna class."""

    name: str
    kwargs: Mapping[str, Any]


@dataclass(frozen=True)
class SweepSettings:
    directions: tuple[str, ...]
    n_trials: int
    n_jobs: int
    seed: Optional[int]
    storage: Optional[str]
    study_name: Optional[str]
    params: tuple[str, ...]  # hydra.sweeper.params as override strings
    sampler: Algorithm
    pruner: Algorithm
    plots: bool
    tensorboard: bool
    test_best: bool  # score the best trial on its test split after the sweep (when it has one)

    @property
    def is_grid(self) -> bool:
        return self.sampler.name == "grid"

    def pruner_spec(self) -> dict[str, Any]:
        """What a trial process needs to rebuild the pruner (see harness.loop.callbacks.sweep_trial.build_pruner)."""
        return {"class": PRUNERS[self.pruner.name], "kwargs": dict(self.pruner.kwargs)}


def parse_settings(options: Mapping[str, Any]) -> SweepSettings:
    directions = _directions(options["direction"])
    sampler = _algorithm("hydra.sweeper.sampler.name", options["sampler"], SAMPLERS)
    pruner = _algorithm("hydra.sweeper.pruner.name", options["pruner"], PRUNERS)
    if len(directions) > 1 and sampler.name in SINGLE_OBJECTIVE_SAMPLERS:
        raise ConfigError(
            "hydra/sweeper/sampler", sampler.name, "a single-objective sampler; for several "
            "directions use nsga2, tpe, random, gp, qmc or grid"
        )
    if len(directions) > 1 and pruner.name != "none":
        raise ConfigError(
            "hydra/sweeper/pruner", pruner.name, "Optuna cannot prune multi-objective studies; "
            "use hydra/sweeper/pruner=none"
        )
    _check_installed(sampler.name)
    return SweepSettings(
        directions=directions,
        n_trials=_positive_int("hydra.sweeper.n_trials", options["n_trials"]),
        n_jobs=_positive_int("hydra.sweeper.n_jobs", options["n_jobs"]),
        seed=options["seed"],
        storage=options["storage"],
        study_name=options["study_name"],
        params=_params(options["params"]),
        sampler=sampler,
        pruner=pruner,
        plots=bool(options["plots"]),
        tensorboard=bool(options["tensorboard"]),
        test_best=bool(options["test_best"]),
    )


def _directions(value: Any) -> tuple[str, ...]:
    raw = list(value) if isinstance(value, (list, tuple, ListConfig)) else [value]
    if not raw or any(str(d).lower() not in DIRECTIONS for d in raw):
        raise ConfigError(
            "hydra.sweeper.direction", _plain(value),
            "minimize, maximize, or a list of them (one per objective) such as "
            "[minimize,minimize]",
        )
    return tuple(str(d).lower() for d in raw)


def _algorithm(key: str, conf: Any, known: Mapping[str, Any]) -> Algorithm:
    kwargs = _plain(conf) if conf is not None else {}
    if not isinstance(kwargs, dict) or "name" not in kwargs:
        raise ConfigError(key.rsplit(".", 1)[0], kwargs, f"a config with a name: one of {list(known)}")
    name = kwargs.pop("name")
    if name not in known:
        raise ConfigError(key, name, f"one of {list(known)}")
    # None means "Optuna's default": leaving it out keeps that default even if it changes.
    return Algorithm(name=name, kwargs={k: v for k, v in kwargs.items() if v is not None})


def _check_installed(sampler: str) -> None:
    missing = [m for m in SAMPLERS[sampler][1] if importlib.util.find_spec(m) is None]
    if missing:
        raise ConfigError(
            "hydra/sweeper/sampler", sampler, f"needs {' and '.join(missing)}: "
            f"pip install {' '.join(missing)}"
        )


def _positive_int(key: str, value: Any) -> int:
    if not is_whole(value) or value < 1:
        raise ConfigError(key, value, "a whole number >= 1")
    return value


def _params(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    params = _plain(value)
    if not isinstance(params, dict):
        raise ConfigError("hydra.sweeper.params", params, "a mapping of key -> sweep, e.g. "
                          "{optim.lr: 'tag(log, interval(1e-4, 1e-2))'}")
    return tuple(f"{k}={_override_text(v)}" for k, v in params.items())


def _override_text(value: Any) -> str:
    """YAML gave a typed value; write it the way Hydra's override grammar reads it back."""
    if isinstance(value, str):
        return value
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    return str(value)


def _plain(value: Any) -> Any:
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value
