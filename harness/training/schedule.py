"""The `schedule` config group: the LR multiplier as a pure function of the optimizer step.

Wrapped in LambdaLR, so the scheduler's checkpoint state is a single step count, and it is
stepped once per optimizer update (never per micro-batch). Steps run 0..max_steps-1: warmup
ends at base LR exactly at step `warmup`, and decaying schedules reach their floor at the
last step, max_steps-1.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from harness.core.errors import ConfigError
from harness.core.typed_config import one_of, read_typed, setting, within

if TYPE_CHECKING:  # the diagnosis reads warmup_steps without importing torch
    from torch.optim import Optimizer
    from torch.optim.lr_scheduler import LambdaLR

NAMES = ("constant", "linear", "cosine", "poly", "inverse_sqrt", "wsd")
ENDS_AT_MIN_LR = ("linear", "cosine", "poly", "wsd")  # their last step's LR is min_lr_ratio x the base LR
DECAY_SHAPES = ("linear", "cosine", "sqrt")
CONTINUITY_TOLERANCE = 0.01  # relative LR change a resume may make (rounding of warmup fractions)


def warmup_steps(cfg: Mapping[str, Any], max_steps: int) -> int:
    """The warmup of a schedule node as a config file holds it (a run's config.yaml too)."""
    return steps_of(cfg.get("warmup", 0), max_steps)


def steps_of(warmup: int | float, max_steps: int) -> int:
    """`warmup` is a step count (int) or a fraction of the run (float in (0, 1))."""
    return int(round(warmup * max_steps)) if isinstance(warmup, float) and 0 < warmup < 1 else int(warmup)


def _warmup_ok(w: float) -> bool:
    return w >= 0 and not (isinstance(w, float) and w >= 1)


@dataclass(frozen=True)
class ScheduleConfig:
    """Every key a schedule option may set (each option's file sets the ones it reads)."""

    name: str = setting("cosine", f"one of {list(NAMES)}", one_of(NAMES))
    warmup: int | float = setting(0.1, "an integer >= 0 (steps) or a float in (0, 1) (fraction of max_steps)",
                                  _warmup_ok)
    min_lr_ratio: float = setting(0.1, "a number in [0, 1]", within(0.0, 1.0))
    power: float = setting(1.0, "a number > 0", lambda v: v > 0)
    decay_fraction: float = setting(0.2, "a number in (0, 1]", within(0.0, 1.0, low_open=True))
    decay_shape: str = setting("linear", f"one of {list(DECAY_SHAPES)}", one_of(DECAY_SHAPES))


def schedule_config(cfg: Mapping[str, Any] | DictConfig) -> ScheduleConfig:
    return read_typed(cfg, ScheduleConfig, "schedule")


def validate_schedule_config(cfg: DictConfig, max_steps: int) -> ScheduleConfig:
    settings = schedule_config(cfg)
    if steps_of(settings.warmup, max_steps) >= max_steps:
        raise ConfigError("schedule.warmup", settings.warmup, f"fewer steps than trainer.max_steps={max_steps}")
    return settings


def _decay(progress: float, shape: str, power: float = 1.0) -> float:
    """1 at progress 0, 0 at progress 1."""
    if shape == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    if shape == "sqrt":
        return 1.0 - math.sqrt(progress)
    return (1.0 - progress) ** power


def lr_factor(step: int, *, name: str, warmup: int, max_steps: int, min_lr_ratio: float = 0.0,
              power: float = 1.0, decay_fraction: float = 0.2, decay_shape: str = "linear") -> float:
    """Multiplier of the base LR at optimizer step `step` (0-based)."""
    if step < warmup:
        return (step + 1) / (warmup + 1)  # never exactly 0, so the first update moves
    if name == "constant":
        return 1.0
    if name == "inverse_sqrt":
        return math.sqrt(max(warmup, 1) / max(step, 1))
    last = max_steps - 1
    decay_start = max(warmup, last - int(round(decay_fraction * max_steps))) if name == "wsd" else warmup
    if step <= decay_start:
        return 1.0
    progress = min(1.0, (step - decay_start) / max(1, last - decay_start))
    shape = {"linear": "linear", "poly": "linear", "cosine": "cosine"}.get(name, decay_shape)
    return min_lr_ratio + (1.0 - min_lr_ratio) * _decay(progress, shape, power if name == "poly" else 1.0)


def schedule_factor(settings: ScheduleConfig, max_steps: int) -> Callable[[int], float]:
    """The `schedule` group's LR multiplier as a function of the optimizer step."""
    return partial(lr_factor, name=settings.name, warmup=steps_of(settings.warmup, max_steps), max_steps=max_steps,
                   min_lr_ratio=settings.min_lr_ratio, power=settings.power, decay_fraction=settings.decay_fraction,
                   decay_shape=settings.decay_shape)


def build_scheduler(settings: ScheduleConfig, optimizer: Optimizer, max_steps: int) -> LambdaLR:
    from torch.optim.lr_scheduler import LambdaLR

    return LambdaLR(optimizer, schedule_factor(settings, max_steps))


class LiveLR:
    """The one writer of the optimizer's learning rates. Each param group's LR is its configured
    LR times the rollbacks' factor times the schedule's multiplier at the current update; the LR
    finder and the doctor may fix the next update's LRs instead. The LambdaLR inside keeps the
    step count a checkpoint holds."""

    def __init__(self, optimizer: Optimizer, scheduler: LambdaLR) -> None:
        self.optimizer, self.scheduler = optimizer, scheduler

    @property
    def base_lrs(self) -> list[float]:
        """Each group's LR before the schedule's multiplier (configured LR x the rollbacks' factor)."""
        return list(self.scheduler.base_lrs)

    def advance(self) -> None:
        """One optimizer update done (a skipped one too): the schedule moves on a step."""
        self.scheduler.step()

    def rescale(self, factor: float) -> None:
        """Base LRs become the configured ones times `factor`; the schedule multiplies on top."""
        self.scheduler.base_lrs = [group["initial_lr"] * factor for group in self.optimizer.param_groups]
        for group, base, multiplier in zip(self.optimizer.param_groups, self.scheduler.base_lrs,
                                           self.scheduler.lr_lambdas):
            group["lr"] = base * multiplier(self.scheduler.last_epoch)

    def fix(self, lrs: list[float]) -> None:
        """The next update's LRs, one per group, outside the schedule; `advance` restores it."""
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr


def check_schedule_continues(saved: DictConfig, schedule: ScheduleConfig, max_steps: int, step: int) -> None:
    """A resumed run must not jump its LR: the schedule that trained up to `step` (`saved`, the
    checkpoint's config) and the one that continues give the same multiplier there. A constant
    schedule, or WSD resumed before its decay, extends to a larger trainer.max_steps; a schedule
    that has (partly) decayed would restart higher, so that is refused."""
    before = schedule_factor(schedule_config(saved.schedule), int(saved.trainer.max_steps))(step)
    after = schedule_factor(schedule, max_steps)(step)
    if abs(after - before) > CONTINUITY_TOLERANCE * before:
        raise ConfigError("trainer.max_steps", max_steps,
                          f"a length that keeps the LR where the checkpoint left it: at step {step} schedule="
                          f"{saved.schedule.name} was at {before:.3g}x the base LR (trainer.max_steps="
                          f"{saved.trainer.max_steps}) and would continue at {after:.3g}x. Runs meant to be "
                          f"extended use schedule=constant, or schedule=wsd resumed from a checkpoint before its "
                          f"decay; "
                          f"to train this one further under a new schedule, start a new run from its weights: "
                          f"init=checkpoint init.path=RUN_DIR hydra.run.dir=NEW_DIR")
