"""Early stopping on the monitored eval value (trainer.monitor, the val loss by default), and on a
val loss that diverges; its counters live in the checkpoint so resume keeps counting."""
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
    def __init__(self, settings: EarlyStopConfig, mode: str = "min") -> None:
        self.patience, self.min_delta, self.ceiling = settings.patience, settings.min_delta, \
            settings.divergence_threshold
        self.sign = 1.0 if mode == "min" else -1.0  # improvements are compared as a loss is: lower is better
        self.best = math.inf  # sign x the best value
        self.bad_evals = 0

    @property
    def best_value(self) -> float:
        return self.sign * self.best

    def update(self, value: float, val_loss: float) -> str | None:
        """Feed one eval (the monitored value, and the val loss, which alone can diverge); returns why
        to stop ("diverged", "early_stopped") or None."""
        if not math.isfinite(val_loss) or (self.ceiling is not None and val_loss > self.ceiling):
            return "diverged"
        if math.isfinite(value) and self.sign * value < self.best - self.min_delta:
            self.best, self.bad_evals = self.sign * value, 0
            return None
        self.bad_evals += 1
        return "early_stopped" if self.patience is not None and self.bad_evals >= self.patience else None

    def state_dict(self) -> dict:
        return {"best": self.best, "bad_evals": self.bad_evals}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.bad_evals = state["best"], state["bad_evals"]
