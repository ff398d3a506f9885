"""The LR range test itself: real updates at exponentially rising LRs until the loss diverges."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.config.lr_find import LRFindConfig
from harness.modes.lr_find.driver import driven
from harness.assembly.assemble import Assembly


@dataclass
class Sweep:
    """What the sweep saw, one entry per update that produced a finite loss."""

    lrs: list[float]
    losses: list[float]
    smoothed: list[float]  # bias-corrected EMA of `losses`: what the stop rule reads
    stop_reason: str


def lr_grid(settings: LRFindConfig) -> np.ndarray:
    """num_steps LRs spaced evenly in log(LR) from min_lr to max_lr."""
    return np.geomspace(settings.min_lr, settings.max_lr, settings.num_steps)


def range_test(built: Assembly, settings: LRFindConfig) -> Sweep:
    """Sweep the LR; the run's state is restored afterwards (see `driven`)."""
    lrs, losses, smoothed = [], [], []
    average, best = 0.0, math.inf
    reason = f"reached max_lr={settings.max_lr:g} without diverging"
    with driven(built) as driver:
        for i, lr in enumerate(lr_grid(settings)):
            loss = driver.step(float(lr))
            if not math.isfinite(loss):
                reason = f"non-finite loss or gradients at lr={lr:.3g}"
                break
            average = settings.beta * average + (1 - settings.beta) * loss
            value = average / (1 - settings.beta ** (i + 1))  # bias correction: early values are not pulled to 0
            lrs.append(float(lr))
            losses.append(loss)
            smoothed.append(value)
            best = min(best, value)
            if value > settings.divergence_factor * best:
                reason = (f"diverged at lr={lr:.3g}: smoothed loss {value:.4g} > "
                          f"{settings.divergence_factor:g} x best {best:.4g}")
                break
    return Sweep(lrs, losses, smoothed, reason)
