"""Typed settings for the non-training modes, read from their config group with defaults.

A mode's group (`lr_find`, `doctor`) may be absent from the composed config (a config tree
that predates it, or a test composing only the core groups); the dataclass defaults then
apply (harness/core/typed_config.py reads them), and `++lr_find.num_steps=50` still works on the
command line.
"""
from __future__ import annotations

import dataclasses

from harness.core.typed_config import Problem, setting, within

# Fewer points cannot hold a descent, a minimum and a smoothing window.
MIN_SWEEP_STEPS = 10


@dataclasses.dataclass(frozen=True)
class LRFindConfig:
    min_lr: float = setting(1e-7, "a number > 0", lambda v: v > 0)
    """First LR of the sweep (the value `optim.lr` takes; other param groups keep their ratio to it)."""
    max_lr: float = setting(1.0, "a number > lr_find.min_lr")
    """Last LR, reached only if the loss has not diverged before."""
    num_steps: int = setting(100, f"an integer >= {MIN_SWEEP_STEPS}", lambda v: v >= MIN_SWEEP_STEPS)
    """Optimizer updates in the sweep, spaced evenly in log(LR)."""
    beta: float = setting(0.9, "a number in [0, 1)", within(0.0, 1.0, high_open=True))
    """EMA factor of the smoothed loss that decides the early stop (bias-corrected)."""
    divergence_factor: float = setting(4.0, "a number > 1", lambda v: v > 1.0)
    """Stop once the smoothed loss exceeds this multiple of its best value."""
    window: float = setting(0.1, "a number in (0, 1)", within(0.0, 1.0, low_open=True, high_open=True))
    """Width of the centred window that smooths the curve for the suggestion, as a fraction of num_steps."""

    def problems(self) -> list[Problem]:
        if not self.max_lr > self.min_lr:
            return [("max_lr", self.max_lr, f"a number > lr_find.min_lr={self.min_lr}")]
        return []

