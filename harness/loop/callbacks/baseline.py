"""Where a run starts: the untrained model's eval, before the first update."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import torch

from harness.core.metric_names import VAL_LOSS
from harness.logger.tracking import finite_or_none
from harness.loop.callbacks.base import Callback
from harness.loop.evaluation import Evaluator
from harness.training.metrics.monitored import INITIAL, summary_field

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer

log = logging.getLogger("harness")
BASELINE = "initial/"  # metrics.jsonl's baseline row: initial/val/loss, ... (no rule reads it as an eval)


class Baseline(Callback):
    """A fresh run first measures where it starts: one eval of the untrained model (loss, parts
    and metrics), the baseline every later eval can be judged against, whatever the objective. Its
    RNG streams are forked, so the run trains as it would have without it; it comes before any
    callback writes a checkpoint, so a resume from the first one keeps it."""

    priority = 110

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    def on_fit_start(self, trainer: Trainer) -> None:
        state = trainer.state
        if state.step or state.baseline:
            return
        with torch.random.fork_rng(devices=[trainer.device] if trainer.device.type == "cuda" else []):
            state.baseline = self.evaluator.evaluate()
        if trainer.tracker:
            trainer.tracker.log(0, {BASELINE + name: value for name, value in state.baseline.items()}, kind="baseline")
            log.info("untrained model: val loss %.4f (the baseline, before any update)", state.baseline[VAL_LOSS])

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        return {summary_field(INITIAL, name): finite_or_none(value) for name, value in trainer.state.baseline.items()}
