"""Early stopping on validation loss; its counters live in the checkpoint so resume keeps counting."""
from __future__ import annotations

import math
from dataclasses import dataclass

from omegaconf import DictConfig

from harness.core.typed_config import at_least, read_typed, setting


@dataclass(frozen=True)
class EarlyStopConfig:
    patience: int | None = setting(None, "null (off) or an integer >= 1", at_least(1))
    min_delta: float = setting(0.0, "a number >= 0", at_least(0.0))
    divergence_threshold: float | None = setting(None, "null (only a NaN val loss stops) or a number: a val "
                                                                  "loss above it stops the run as diverged")


def early_stop_config(cfg: DictConfig) -> EarlyStopConfig:
    return read_typed(cfg, EarlyStopConfig, "early_stop")


class EarlyStopping:
    def __init__(self, settings: EarlyStopConfig) -> None:
        self.patience, self.min_delta, self.ceiling = settings.patience, settings.min_delta, \
            settings.divergence_threshold
        self.best = math.inf
        self.bad_evals = 0

    def update(self, val_loss: float) -> str | None:
        """Feed one eval; returns why to stop ("diverged", "early_stopped") or None."""
        if not math.isfinite(val_loss) or (self.ceiling is not None and val_loss > self.ceiling):
            return "diverged"
        if val_loss < self.best - self.min_delta:
            self.best, self.bad_evals = val_loss, 0
            return None
        self.bad_evals += 1
        return "early_stopped" if self.patience is not None and self.bad_evals >= self.patience else None

    def state_dict(self) -> dict:
        return {"best": self.best, "bad_evals": self.bad_evals}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.bad_evals = state["best"], state["bad_evals"]
