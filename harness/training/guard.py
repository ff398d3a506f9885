"""The guard: decide, once per update and on the device, whether the update is safe to apply.

Bad updates are non-finite (NaN/Inf loss or gradients) or loss spikes (z-score against a
rolling window of recent good losses, OLMo-core style, taken on the log of the loss: a spike is
a multiplicative jump, and a converged classifier's near-zero batch losses wobble by factors
that a linear z-score reads as 10 sigma when one batch holds one hard sample). A bad update
moves neither the parameters nor the optimizer's moments. When `rollback_after` bad updates
fall within `rollback_window` steps, the trainer rolls back to its rollback point (rollback_point.py)
with a lower LR. A bad update whose samples stand out from their batch (attribution.py) is the data's
fault, not the model's: it is skipped and reported, but counts towards no rollback and no LR cut
(guard.cut_lr_for_data=true counts it like any other).

The verdict is a device tensor, so deciding costs no host read: the loss is compared with a
device-side limit, exp(mean + z * std) of the window's log losses. The window itself lives on
the host and is updated when the host reads the verdicts (the next logging step, eval or
checkpoint), so the limit lags by at most that long, and a read costs nothing extra. Optimizers
that accept a `found_inf` tensor (torch's fused Adam/AdamW/SGD: the mechanism GradScaler uses)
skip a bad update on the device too. Any other optimizer has no such path, so for it the verdict
is read once per update and `step()` is not called. Under DDP the loss and grad norm are
averaged over ranks first, so every rank takes the same decision.
"""
from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass

import torch
from omegaconf import DictConfig

from harness.core.distributed import DistInfo, all_reduce_mean
from harness.core.typed_config import Problem, at_least, read_typed, setting, within


LOSS_FLOOR = 1e-12  # a loss of exactly 0 has no log; below this every loss counts as equal
STD_FLOOR = 1e-8  # a window of identical losses: any rise above them counts as a spike
MAX_EXPONENT = 700.0  # exp() of more overflows a float; such a limit is infinite in effect anyway


class Verdict:
    """Codes of the device verdict (a 0-d int tensor)."""

    OK = 0
    NONFINITE = 1
    OVERFLOW = 2  # fp16 with loss scaling: expected now and then, the scaler backs off
    SPIKE = 3
    EMPTY = 4  # every target was the ignore index: nothing to learn from, nothing wrong


@dataclass(frozen=True)
class GuardConfig:
    skip_nonfinite: bool = setting(True, "true or false")
    spike_zscore: float | None = setting(6.0, "null (off) or a number > 0", lambda v: v > 0)
    spike_window: int = setting(128, "an integer >= 1", at_least(1))
    spike_min_history: int = setting(20, "an integer >= 1", at_least(1))
    rollback_after: int | None = setting(4, "null (off) or an integer >= 1", at_least(1))
    rollback_window: int = setting(50, "an integer >= 1", at_least(1))
    rollback_lr_factor: float = setting(0.5, "a number in (0, 1]", within(0.0, 1.0, low_open=True))
    max_rollbacks: int = setting(3, "a non-negative integer", at_least(0))
    snapshot_every: int | None = setting(50, "null (roll back to checkpoints) or an integer >= 1", at_least(1))
    cut_lr_for_data: bool = setting(False, "true or false")

    def problems(self) -> list[Problem]:
        if self.spike_min_history > self.spike_window:
            return [("spike_min_history", self.spike_min_history, f"<= guard.spike_window={self.spike_window}")]
        return []


def guard_config(cfg: DictConfig) -> GuardConfig:
    return read_typed(cfg, GuardConfig, "guard")


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether `step()` honours a `found_inf` tensor: torch marks such optimizers for GradScaler."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False))


class Guard:
    def __init__(self, settings: GuardConfig, dist: DistInfo, device: torch.device) -> None:
        self.cfg = settings
        self.dist = dist
        self.enabled = self.cfg.skip_nonfinite or self.cfg.spike_zscore is not None
        self.history: deque[float] = deque(maxlen=self.cfg.spike_window)  # logs of good losses, as last read
        self.limit = torch.full((), math.inf, device=device)  # a loss above it is a spike; set at each read
        self.always_ok = torch.zeros((), dtype=torch.long, device=device)
        self.bad_steps: list[int] = []  # steps of recent bad updates the model is blamed for, for the rollback rule

    def judge(self, loss: torch.Tensor, grad_norm: torch.Tensor, loss_scaling: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """(Verdict code, the loss every rank agrees on) as device tensors: a handful of tiny ops,
        no host read. The spike limit comes from the good losses up to the last read."""
        if not self.enabled:
            return self.always_ok, loss
        values = all_reduce_mean(torch.stack([loss, grad_norm]).float(), self.dist)
        agreed = values[0]
        if loss_scaling:
            nonfinite = Verdict.OVERFLOW
        else:
            nonfinite = Verdict.NONFINITE if self.cfg.skip_nonfinite else Verdict.OK
        verdict = torch.where(values.isfinite().all(), (agreed > self.limit) * Verdict.SPIKE, nonfinite)
        return verdict, agreed

    def remember(self, good_losses: list[float]) -> None:
        """At a read of the verdicts: the good losses join the window and the spike limit follows
        (exp(mean + z * std) of the log losses: the z-score rule, in loss units)."""
        self.history.extend(math.log(max(x, LOSS_FLOOR)) for x in good_losses)
        self._set_limit()

    def _set_limit(self) -> None:
        if self.cfg.spike_zscore is None or len(self.history) < self.cfg.spike_min_history:
            self.limit.fill_(math.inf)
            return
        mean, std = statistics.fmean(self.history), statistics.pstdev(self.history)
        self.limit.fill_(math.exp(min(mean + self.cfg.spike_zscore * max(std, STD_FLOOR), MAX_EXPONENT)))

    def record_bad(self, step: int, data_cause: bool = False) -> bool:
        """Note a bad update at `step`; True when the rollback rule fires. An update the data is
        blamed for moved nothing (it was skipped) and says nothing against the model's state: a
        rollback and a lower LR would only lose good updates."""
        if self.cfg.rollback_after is None or (data_cause and not self.cfg.cut_lr_for_data):
            return False
        self.bad_steps = [s for s in self.bad_steps if s > step - self.cfg.rollback_window] + [step]
        return len(self.bad_steps) >= self.cfg.rollback_after

    def state_dict(self) -> dict:
        return {"log_history": list(self.history), "bad_steps": list(self.bad_steps)}

    def load_state_dict(self, state: dict) -> None:
        self.history = deque(state["log_history"], maxlen=self.cfg.spike_window)
        self.bad_steps = list(state["bad_steps"])
        self._set_limit()
