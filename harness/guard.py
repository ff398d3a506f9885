"""The guard: decide, once per update and on the device, whether the update is safe to apply.

Bad updates are non-finite (NaN/Inf loss or gradients) or loss spikes (z-score against a
rolling window of recent good losses, OLMo-core style, taken on the log of the loss: a spike is
a multiplicative jump, and a converged classifier's near-zero batch losses wobble by factors
that a linear z-score reads as 10 sigma when one batch holds one hard sample). A bad update
moves neither the parameters nor the optimizer's moments. When `rollback_after` bad updates
fall within `rollback_window` steps, the trainer rolls back to its last checkpoint with a lower LR.

The verdict is a device tensor, and the spike window a device ring buffer, so deciding costs no
host read. Optimizers that accept a `found_inf` tensor (torch's fused Adam/AdamW/SGD: the
mechanism GradScaler uses) skip a bad update on the device too. Any other optimizer has no such
path, so for it the verdict is read once per update and `step()` is not called. Under DDP the
loss and grad norm are averaged over ranks first, so every rank takes the same decision.
The host hears about bad updates at the next logging step, checkpoint or eval (`Verdicts`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from omegaconf import DictConfig

from harness.distributed import DistInfo, all_reduce_mean
from harness.errors import ConfigError


LOSS_FLOOR = 1e-12  # a loss of exactly 0 has no log; below this every loss counts as equal
STD_FLOOR = 1e-8  # a window of identical losses: any rise above them counts as a spike


class Verdict:
    """Codes of the device verdict (a 0-d int tensor)."""

    OK = 0
    NONFINITE = 1
    OVERFLOW = 2  # fp16 with loss scaling: expected now and then, the scaler backs off
    SPIKE = 3


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


def skips_on_device(optimizer: torch.optim.Optimizer) -> bool:
    """Whether `step()` honours a `found_inf` tensor: torch marks such optimizers for GradScaler."""
    return bool(getattr(optimizer, "_step_supports_amp_scaling", False))


class Guard:
    def __init__(self, cfg: DictConfig, dist: DistInfo, device: torch.device) -> None:
        self.cfg = GuardConfig(**cfg)
        self.dist = dist
        self.enabled = self.cfg.skip_nonfinite or self.cfg.spike_zscore is not None
        self.window = torch.zeros(self.cfg.spike_window, device=device)  # logs of recent good losses, a ring
        self.seen = torch.zeros(1, dtype=torch.long, device=device)  # good losses written into the ring so far
        self.positions = torch.arange(self.cfg.spike_window, device=device)
        self.bad_steps: list[int] = []  # steps of recent bad updates, for the rollback rule

    def judge(self, loss: torch.Tensor, grad_norm: torch.Tensor, loss_scaling: bool) -> torch.Tensor:
        """This update's Verdict code, as a device tensor; remembers the loss when it is good."""
        if not self.enabled:
            return torch.zeros((), dtype=torch.long, device=self.window.device)
        loss, grad_norm = all_reduce_mean(torch.stack([loss, grad_norm]).float(), self.dist)
        finite = torch.isfinite(loss) & torch.isfinite(grad_norm)
        log_loss = torch.log(torch.clamp(torch.nan_to_num(loss), min=LOSS_FLOOR))
        spike = finite & self._is_spike(log_loss)
        if loss_scaling:
            nonfinite = Verdict.OVERFLOW
        else:
            nonfinite = Verdict.NONFINITE if self.cfg.skip_nonfinite else Verdict.OK
        verdict = torch.where(finite, torch.where(spike, Verdict.SPIKE, Verdict.OK), nonfinite)
        self._remember(log_loss, finite & ~spike)
        return verdict

    def _is_spike(self, log_loss: torch.Tensor) -> torch.Tensor:
        if self.cfg.spike_zscore is None:
            return torch.zeros((), dtype=torch.bool, device=log_loss.device)
        n = torch.clamp(self.seen, max=self.cfg.spike_window)
        filled = (self.positions < n).float()
        mean = (self.window * filled).sum() / n.clamp(min=1)
        std = torch.sqrt((((self.window - mean) * filled) ** 2).sum() / n.clamp(min=1))
        return ((n >= self.cfg.spike_min_history) & (log_loss - mean > self.cfg.spike_zscore * std.clamp(min=STD_FLOOR))).squeeze(0)

    def _remember(self, log_loss: torch.Tensor, good: torch.Tensor) -> None:
        slot = self.seen % self.cfg.spike_window
        kept = torch.where(good, log_loss, self.window.index_select(0, slot).squeeze(0))
        self.window.index_copy_(0, slot, kept.view(1))
        self.seen += good.long()

    def record_bad(self, step: int) -> bool:
        """Note a bad update at `step`; True when the rollback rule fires."""
        if self.cfg.rollback_after is None:
            return False
        self.bad_steps = [s for s in self.bad_steps if s > step - self.cfg.rollback_window] + [step]
        return len(self.bad_steps) >= self.cfg.rollback_after

    def state_dict(self) -> dict:
        # the ring as it lies (not reordered), so a resumed run sums it in the same order: bit-exact
        return {"ring": self.window.tolist(), "seen": int(self.seen.item()), "bad_steps": list(self.bad_steps)}

    def load_state_dict(self, state: dict) -> None:
        self.bad_steps = list(state["bad_steps"])
        if len(state.get("ring", ())) == self.cfg.spike_window:
            self.window.copy_(torch.tensor(state["ring"], dtype=self.window.dtype))
            self.seen.fill_(state["seen"])
            return
        if "ring" in state:  # guard.spike_window changed: keep the newest losses that fit
            logs = _oldest_first(state["ring"], state["seen"])
        elif "log_history" in state:  # older checkpoints kept a list, oldest first
            logs = state["log_history"]
        else:  # and before that, raw losses
            logs = [math.log(max(x, LOSS_FLOOR)) for x in state["history"]]
        logs = logs[-self.cfg.spike_window:]
        self.window.zero_()
        self.window[:len(logs)] = torch.tensor(logs, dtype=self.window.dtype)
        self.seen.fill_(len(logs))


def _oldest_first(ring: list[float], seen: int) -> list[float]:
    size = len(ring)
    return ring[:seen] if seen <= size else ring[seen % size:] + ring[:seen % size]
