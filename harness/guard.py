"""The guard: decide, once per update, whether the update is safe to apply.

Bad updates are non-finite (NaN/Inf loss or gradients) or loss spikes (z-score against a
rolling window of recent good losses, OLMo-core style, taken on the log of the loss: a spike is
a multiplicative jump, and a converged classifier's near-zero batch losses wobble by factors
that a linear z-score reads as 10 sigma when one batch holds one hard sample). A bad update is skipped
before `optimizer.step()`, so neither parameters nor optimizer moments see it. When
`rollback_after` bad updates fall within `rollback_window` steps, the trainer rolls back to
its last checkpoint with a lower LR.

The decision costs one host read per update: the loss and the grad norm, summed over ranks
first so every rank sees the same numbers and takes the same decision (a NaN on one rank is a
NaN on all). The spike statistics then live on the host. With the guard off
(`skip_nonfinite=false`, `spike_zscore=null`) there is no read at all.
"""
from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass
from enum import Enum

import torch
from omegaconf import DictConfig

from harness.distributed import DistInfo, all_reduce_mean
from harness.errors import ConfigError


LOSS_FLOOR = 1e-12  # a loss of exactly 0 has no log; below this every loss counts as equal


class Verdict(Enum):
    OK = "ok"
    NONFINITE = "nonfinite"
    OVERFLOW = "overflow"  # fp16 with loss scaling: expected now and then, the scaler backs off
    SPIKE = "spike"


@dataclass
class GuardConfig:
    skip_nonfinite: bool = True
    spike_zscore: float | None = 6.0
    spike_window: int = 128
    spike_min_history: int = 20
    rollback_after: int | None = 4
    rollback_window: int = 50
    rollback_lr_factor: float = 0.5
    max_rollbacks: int = 3


def validate_guard_config(cfg: DictConfig) -> None:
    if cfg.get("spike_zscore") is not None and not float(cfg.spike_zscore) > 0:
        raise ConfigError("guard.spike_zscore", cfg.spike_zscore, "null (off) or a number > 0")
    for key in ("spike_window", "spike_min_history", "rollback_window", "max_rollbacks"):
        value = cfg.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "max_rollbacks" else 1):
            raise ConfigError(f"guard.{key}", value, "a non-negative integer" if key == "max_rollbacks" else "an integer >= 1")
    if cfg.get("spike_min_history", 1) > cfg.get("spike_window", 1):
        raise ConfigError("guard.spike_min_history", cfg.spike_min_history, f"<= guard.spike_window={cfg.spike_window}")
    if cfg.get("rollback_after") is not None and (not isinstance(cfg.rollback_after, int) or cfg.rollback_after < 1):
        raise ConfigError("guard.rollback_after", cfg.rollback_after, "null (off) or an integer >= 1")
    if not 0.0 < float(cfg.get("rollback_lr_factor", 0.5)) <= 1.0:
        raise ConfigError("guard.rollback_lr_factor", cfg.rollback_lr_factor, "a number in (0, 1]")


class Guard:
    def __init__(self, cfg: DictConfig, dist: DistInfo) -> None:
        self.cfg = GuardConfig(**cfg)
        self.dist = dist
        self.enabled = self.cfg.skip_nonfinite or self.cfg.spike_zscore is not None
        self.history: deque[float] = deque(maxlen=self.cfg.spike_window)  # logs of recent good losses
        self.bad_steps: list[int] = []  # steps of recent bad updates, for the rollback rule

    def check(self, loss: torch.Tensor, grad_norm: torch.Tensor, loss_scaling: bool) -> Verdict:
        """Classify this update; the one host read of the step happens here."""
        if not self.enabled:
            return Verdict.OK
        loss_value, norm_value = all_reduce_mean(torch.stack([loss, grad_norm]), self.dist).tolist()
        if not (math.isfinite(loss_value) and math.isfinite(norm_value)):
            if loss_scaling:
                return Verdict.OVERFLOW
            return Verdict.NONFINITE if self.cfg.skip_nonfinite else Verdict.OK
        log_loss = math.log(max(loss_value, LOSS_FLOOR))
        if self._is_spike(log_loss):
            return Verdict.SPIKE
        self.history.append(log_loss)
        return Verdict.OK

    def _is_spike(self, log_loss: float) -> bool:
        if self.cfg.spike_zscore is None or len(self.history) < self.cfg.spike_min_history:
            return False
        mean, std = statistics.fmean(self.history), statistics.pstdev(self.history)
        return log_loss - mean > self.cfg.spike_zscore * max(std, 1e-8)

    def record_bad(self, step: int) -> bool:
        """Note a bad update at `step`; True when the rollback rule fires."""
        if self.cfg.rollback_after is None:
            return False
        self.bad_steps = [s for s in self.bad_steps if s > step - self.cfg.rollback_window] + [step]
        return len(self.bad_steps) >= self.cfg.rollback_after

    def state_dict(self) -> dict:
        return {"log_history": list(self.history), "bad_steps": list(self.bad_steps)}

    def load_state_dict(self, state: dict) -> None:
        logs = state["log_history"] if "log_history" in state else [  # older checkpoints kept raw losses
            math.log(max(x, LOSS_FLOOR)) for x in state["history"]]
        self.history = deque(logs, maxlen=self.cfg.spike_window)
        self.bad_steps = list(state["bad_steps"])
