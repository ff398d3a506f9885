"""Typed settings for the non-training modes, read from their config group with defaults.

A mode's group (`lr_find`, `doctor`) may be absent from the composed config (a config tree
that predates it, or a test composing only the core groups); the dataclass defaults then
apply, and `++lr_find.num_steps=50` still works on the command line.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Protocol, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.errors import ConfigError


class Validated(Protocol):
    def validate(self) -> list[tuple[str, object, str]]:
        """(key, value, what is allowed) for every bad field."""
        ...


T = TypeVar("T", bound=Validated)


def read_mode_config(cfg: DictConfig, group: str, schema: type[T]) -> T:
    """`cfg[group]` type-checked into `schema`; unknown keys and bad values raise ConfigError."""
    node: Any = cfg.get(group) or {}
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), node)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "?"
        allowed = [f.name for f in dataclasses.fields(schema)]  # type: ignore[arg-type]
        raise ConfigError(f"{group}.{key}", getattr(err, "value", None),
                          f"a key of {allowed} with the right type") from None
    settings = OmegaConf.to_object(merged)
    for key, value, allowed in settings.validate():
        raise ConfigError(f"{group}.{key}", value, allowed)
    return settings  # type: ignore[return-value]


@dataclasses.dataclass
class LRFindConfig:
    min_lr: float = 1e-7
    """First LR of the sweep (the value `optim.lr` takes; other param groups keep their ratio to it)."""
    max_lr: float = 1.0
    """Last LR, reached only if the loss has not diverged before."""
    num_steps: int = 100
    """Optimizer updates in the sweep, spaced evenly in log(LR)."""
    beta: float = 0.9
    """EMA factor of the smoothed loss that decides the early stop (bias-corrected)."""
    divergence_factor: float = 4.0
    """Stop once the smoothed loss exceeds this multiple of its best value."""
    window: float = 0.1
    """Width of the centred window that smooths the curve for the suggestion, as a fraction of num_steps."""

    def validate(self) -> list[tuple[str, object, str]]:
        problems: list[tuple[str, object, str]] = []
        if not self.min_lr > 0:
            problems.append(("min_lr", self.min_lr, "a number > 0"))
        if not self.max_lr > self.min_lr:
            problems.append(("max_lr", self.max_lr, f"a number > lr_find.min_lr={self.min_lr}"))
        if self.num_steps < MIN_SWEEP_STEPS:
            problems.append(("num_steps", self.num_steps, f"an integer >= {MIN_SWEEP_STEPS}"))
        if not 0.0 <= self.beta < 1.0:
            problems.append(("beta", self.beta, "a number in [0, 1)"))
        if not self.divergence_factor > 1.0:
            problems.append(("divergence_factor", self.divergence_factor, "a number > 1"))
        if not 0.0 < self.window < 1.0:
            problems.append(("window", self.window, "a number in (0, 1)"))
        return problems


# Fewer points cannot hold a descent, a minimum and a smoothing window.
MIN_SWEEP_STEPS = 10
