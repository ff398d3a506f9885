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

from harness.core.overrides import overridden
from harness.core.typed_config import at_least, one_of, read_typed, setting

RULES = ("linear", "sqrt")
log = logging.getLogger("harness")


@dataclass(frozen=True)
class ScaleLRConfig:
    base_batch: int | None = setting(None, "null (off) or the batch size optim.lr was tuned at (>= 1)", at_least(1))
    rule: str = setting("linear", f"one of {list(RULES)}", one_of(RULES))


def scale_lr_config(cfg: DictConfig) -> ScaleLRConfig:
    return read_typed(cfg, ScaleLRConfig, "scale_lr")


def scaled_lr(cfg: DictConfig, settings: ScaleLRConfig) -> DictConfig:
    """The config with optim.lr and schedule.warmup rescaled; `cfg` itself when scaling is off."""
    base = settings.base_batch
    if base is None or base == cfg.batch_size:
        return cfg
    k = cfg.batch_size / base
    factor = k if settings.rule == "linear" else math.sqrt(k)
    warmup = cfg.schedule.get("warmup", 0)
    changes = [f"optim.lr={float(cfg.optim.lr) * factor!r}"]
    if isinstance(warmup, int) and warmup > 0:
        changes.append(f"schedule.warmup={max(1, round(warmup / k))}")
    scaled = overridden(cfg, changes)
    log.info("scale_lr (%s): batch %d = %.3gx base %d: optim.lr %g -> %g, warmup %s -> %s steps",
             settings.rule, cfg.batch_size, k, base, cfg.optim.lr, scaled.optim.lr, warmup, scaled.schedule.get("warmup"))
    return scaled
