"""Batch-size scaling of the LR (`scale_lr`): move a recipe tuned at one batch size to another.

linear  lr x k, k = batch_size / base_batch (Goyal et al. 2017, SGD; pair it with warmup)
sqrt    lr x sqrt(k) (Adam-family optimizers; Malladi et al. 2022)
Warmup given in steps shrinks by k, so it still covers the same number of samples; a warmup
given as a fraction of the run is left alone.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from omegaconf import DictConfig

from harness.core.errors import ConfigError
from harness.core.typed_config import at_least, one_of, read_typed, setting

RULES = ("linear", "sqrt")
log = logging.getLogger("harness")


@dataclass(frozen=True)
class ScaleLRConfig:
    base_batch: int | None = setting(None, "null (off) or the batch size optim.lr was tuned at (>= 1)", at_least(1))
    rule: str = setting("linear", f"one of {list(RULES)}", one_of(RULES))


def scale_lr_config(cfg: DictConfig) -> ScaleLRConfig:
    return read_typed(cfg, ScaleLRConfig, "scale_lr")


def lr_scaling(batch_size: int, lr: float | None, warmup: int | float, settings: ScaleLRConfig) -> list[str]:
    """The overrides that rescale optim.lr and schedule.warmup for the batch size; none when off."""
    base = settings.base_batch
    if base is None or base == batch_size:
        return []
    if lr is None:
        raise ConfigError("scale_lr.base_batch", base, "null: the optim node sets no lr to scale")
    k = batch_size / base
    factor = k if settings.rule == "linear" else math.sqrt(k)
    changes = [f"optim.lr={float(lr) * factor!r}"]
    steps = max(1, round(warmup / k)) if isinstance(warmup, int) and warmup > 0 else warmup
    if steps != warmup:
        changes.append(f"schedule.warmup={steps}")
    log.info("scale_lr (%s): batch %d = %.3gx base %d: optim.lr %g -> %g, warmup %s -> %s steps",
             settings.rule, batch_size, k, base, lr, float(lr) * factor, warmup, steps)
    return changes
