"""The `trainer` node and the clock it sets: when logs, evals and checkpoints fall due, and when
a run stops."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from harness.core.distributed import DistInfo, any_rank
from harness.core.metric_names import VAL_ACCURACY, VAL_LOSS, VAL_LOSS_PART, VAL_PREFIX
from harness.core.typed_config import at_least, one_of, read_typed, setting
from harness.loop.hooks import Tick
from harness.loop.signals import StopRequest


@dataclass(frozen=True)
class TrainerConfig:
    """The `trainer` node: how long to train and when logs, evals and checkpoints fall due."""

    max_steps: int = setting(1000, "an integer >= 1", at_least(1))
    log_every: int = setting(25, "an integer >= 1", at_least(1))
    eval_every: int = setting(200, "an integer >= 1", at_least(1))
    eval_batches: int = setting(20, "an integer >= 1", at_least(1))
    ckpt_every: int = setting(200, "an integer >= 1", at_least(1))
    keep_last: int = setting(2, "an integer >= 1", at_least(1))
    stop_after: int | None = setting(None, "an integer >= 1", at_least(1))
    monitor: str = setting(VAL_LOSS, f"{VAL_LOSS}, or {VAL_PREFIX}NAME of a value this run logs at each eval "
                                     f"({VAL_ACCURACY}, {VAL_PREFIX}f1 of metrics.f1, {VAL_LOSS_PART}PART of your "
                                     f"objective)", lambda v: v.startswith(VAL_PREFIX))
    monitor_mode: str | None = setting(None, "null (inferred: losses min, accuracies max, a torchmetrics Metric's "
                                             "higher_is_better), min or max", one_of(("min", "max")))


def trainer_config(cfg: Any) -> TrainerConfig:
    return read_typed(cfg, TrainerConfig, "trainer")


class Cadence:
    """When logs, evals and checkpoints fall due, and whether to stop: one clock every callback reads,
    so that the guard's verdicts are read before anything else reads the state."""

    def __init__(self, t: TrainerConfig, dist: DistInfo, device: torch.device) -> None:
        # plain attributes, not the config node: OmegaConf lookups cost microseconds each, too much for every step
        self.log_every, self.eval_every, self.ckpt_every = t.log_every, t.eval_every, t.ckpt_every
        self.max_steps, self.stop_after = t.max_steps, t.stop_after
        self.dist, self.device = dist, device
        self.stop_request = StopRequest()
        self.start_step = 0

    def is_log_step(self, step: int) -> bool:
        return step % self.log_every == 0 or step == self.max_steps

    def tick(self, step: int) -> Tick:
        last, log_step = step == self.max_steps, self.is_log_step(step)
        preempted = self._preempted(step, log_step)
        stop = preempted or bool(self.stop_after and step - self.start_step >= self.stop_after)
        return Tick(step, last, log_step, step % self.eval_every == 0 or last,
                    step % self.ckpt_every == 0 or last or stop, preempted, stop)

    def _preempted(self, step: int, log_step: bool) -> bool:
        """A stop signal seen by any rank. Ranks can receive it a step apart, so under DDP
        they agree on it at logging steps only (one tiny all-reduce there, none elsewhere)."""
        if not self.dist.enabled:
            return self.stop_request.signal_name is not None
        return log_step and any_rank(self.stop_request.signal_name is not None, self.dist, self.device)
