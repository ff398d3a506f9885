"""`trainer.monitor`: the one eval value that picks best.pt, drives early stopping and is what a sweep
trial reports to the pruner; `trainer.monitor_mode` says which way is better where the run cannot
tell (a loss is `min`, an accuracy `max`, a torchmetrics Metric says with `higher_is_better`)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from omegaconf import ListConfig

from harness.core.errors import ConfigError
from harness.core.metric_names import VAL_ACCURACY, VAL_LABEL_ACCURACY, VAL_LOSS, VAL_PERPLEXITY, VAL_PREFIX, flat
from harness.training.metrics.spec import MODE_OF, MetricSpec

# summary.json's fields for a logged name: best_val_f1, final_val_f1, initial_val_f1 (the untrained model's)
BEST, FINAL, INITIAL = "best_", "final_", "initial_"


@dataclass(frozen=True)
class Monitored:
    """The monitored name (`val/loss`, `val/f1`, `val/loss/recon`) and which way is better."""

    name: str
    mode: str  # min | max

    def better(self, value: float | None, best: float | None) -> bool:
        """Whether `value` improves on `best` (None: nothing yet); a non-finite value never does."""
        if value is None or not math.isfinite(value):
            return False
        return best is None or (value < best if self.mode == "min" else value > best)


def may_log(metrics: dict[str, MetricSpec]) -> dict[str, str | None]:
    """What a run may log at each eval, known from its config alone (name -> mode; None: not known):
    which of the built-in ones it does depends on the data, which assembly checks."""
    built_in = {VAL_LOSS: "min", VAL_ACCURACY: "max", VAL_LABEL_ACCURACY: "max", VAL_PERPLEXITY: "min"}
    return {**built_in, **{VAL_PREFIX + name: MODE_OF[spec.declared_higher_is_better] for name, spec in metrics.items()}}


def resolve_monitor(name: str, mode: str | None, logged: dict[str, str | None]) -> Monitored:
    """The monitor checked against what this run logs at each eval (`logged`: name -> its mode, None
    where not known); refused in one line, before any training, where it is never logged or its
    direction is unknown."""
    if name not in logged:
        raise ConfigError("trainer.monitor", name, f"a value this run logs at each eval: one of {sorted(logged)}")
    known = logged[name]
    if mode is None and known is None:
        raise ConfigError("trainer.monitor_mode", None, f"min or max: which way {name} is better is not known "
                                                        f"(set it, or metrics.NAME.higher_is_better)")
    return Monitored(name, mode or known)


def summary_field(kind: str, name: str) -> str:
    """`best_` or `final_` + a logged name, as summary.json and a sweep's `objective` spell it."""
    return kind + flat(name)


def default_objectives(objective: Any, monitor: str) -> tuple[str, ...]:
    """The `objective` key as a tuple of summary fields; null is the monitor's best (best_val_loss)."""
    if objective is None:
        return (summary_field(BEST, monitor),)
    return tuple(map(str, objective)) if isinstance(objective, (list, tuple, ListConfig)) else (str(objective),)


def objective_metric(objective: str, logged: dict[str, str | None]) -> str | None:
    """The logged name a summary objective follows (best_val_f1 -> val/f1), or None (wall time, a train loss)."""
    for name in logged:
        if objective in (summary_field(BEST, name), summary_field(FINAL, name)):
            return name
    return None


def check_objectives(objectives: tuple[str, ...], logged: dict[str, str | None], fixed: tuple[str, ...]) -> None:
    """Each objective is a fixed summary field or best_/final_ of a name this run logs (a best_ one needs its
    direction); refused in one line before any training otherwise."""
    for objective in objectives:
        name = objective_metric(objective, logged)
        if objective in fixed or (name is not None and (objective.startswith(FINAL) or logged[name] is not None)):
            continue
        allowed = sorted({*fixed, *(summary_field(FINAL, n) for n in logged),
                          *(summary_field(BEST, n) for n, m in logged.items() if m is not None)})
        raise ConfigError("objective", objective, f"a summary field this run writes: one of {allowed}")


def resolve_selection(monitor: str, monitor_mode: str | None, objectives: tuple[str, ...],
                      logged: dict[str, str | None], fixed: tuple[str, ...],
                      direction: str | None = None) -> tuple[Monitored, str]:
    """The monitor, and the logged name a sweep trial reports at each eval (its objective's, else the
    monitor's); with the sweep's `direction` (minimize / maximize), one that contradicts that name's
    mode is refused before any training."""
    monitored = resolve_monitor(monitor, monitor_mode, logged)
    check_objectives(objectives, logged, fixed)
    reported = objective_metric(objectives[0], logged) or monitored.name
    if direction is not None:
        check_direction(objectives[0], reported, monitored.mode if reported == monitored.name else logged[reported],
                        direction)
    return monitored, reported


def check_direction(objective: str, name: str, mode: str | None, direction: str) -> None:
    """A sweep's direction (minimize / maximize) that contradicts the mode of the logged `name` its
    objective follows is refused in one line, naming the direction to set."""
    if mode is None or direction == DIRECTIONS[mode]:
        return
    raise ConfigError("objective", objective, f"a value to {direction}: the sweep's direction={direction} contradicts "
                                              f"{name}, which is better {'higher' if mode == 'max' else 'lower'} (set "
                                              f"hydra.sweeper.direction={DIRECTIONS[mode]})")


DIRECTIONS = {"min": "minimize", "max": "maximize"}
