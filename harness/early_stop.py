"""Early stopping on validation loss; its counters live in the checkpoint so resume keeps counting."""
from __future__ import annotations

import math

from omegaconf import DictConfig

from harness.errors import ConfigError
from harness.validation import is_whole


def validate_early_stop_config(cfg: DictConfig) -> None:
    patience = cfg.get("patience")
    if patience is not None and (not is_whole(patience) or patience < 1):
        raise ConfigError("early_stop.patience", patience, "null (off) or an integer >= 1")
    if float(cfg.get("min_delta", 0.0)) < 0:
        raise ConfigError("early_stop.min_delta", cfg.min_delta, "a number >= 0")


class EarlyStopping:
    def __init__(self, cfg: DictConfig) -> None:
        self.patience = cfg.get("patience")
        self.min_delta = float(cfg.get("min_delta", 0.0))
        self.ceiling = cfg.get("divergence_threshold")
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
