"""At each eval: the validation pass and its log, best.pt when the monitored value improved, early stopping."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from harness.loop.callbacks.base import Callback
from harness.training.early_stop import EarlyStopping
from harness.loop.evaluation import Evaluator
from harness.loop.hooks import Stop, Tick
from harness.core.metric_names import VAL_ACCURACY, VAL_LOSS
from harness.loop.step import StepResult
from harness.training.metrics.monitored import BEST, FINAL, Monitored, summary_field
from harness.logger.tracking import finite_or_none

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer

OWN_FIELDS = (VAL_LOSS, VAL_ACCURACY)  # summary.json's best_val_loss, best_val_accuracy: fields of the trainer's


class Evaluation(Callback):
    priority = 80

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator
        self.logged = evaluator.logged

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> None:
        if not tick.eval:
            return
        measured = self.evaluator.evaluate()
        state = trainer.state
        state.last_val_loss, state.last_eval = measured[VAL_LOSS], measured
        if math.isfinite(state.last_val_loss) and state.last_val_loss < state.best_val_loss:
            state.best_val_loss = state.last_val_loss
        for name, mode in self.logged.items():
            if mode is not None and name not in OWN_FIELDS and Monitored(name, mode).better(
                    measured.get(name), state.best_metrics.get(name)):
                state.best_metrics[name] = measured[name]
        if trainer.tracker:
            trainer.tracker.log(state.step, measured, kind="eval")
        if VAL_ACCURACY in measured:
            state.best_val_accuracy = max(measured[VAL_ACCURACY], state.best_val_accuracy or 0.0)

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        state = trainer.state
        fields = {summary_field(FINAL, name): finite_or_none(state.last_eval.get(name))
                  for name in self.logged if name not in OWN_FIELDS}
        fields.update({summary_field(BEST, name): finite_or_none(value) for name, value in state.best_metrics.items()})
        return {**self.evaluator.summary(), **fields}

    def close(self) -> None:
        self.evaluator.close()


class BestCheckpoint(Callback):
    """best.pt (best.dcp when sharded): the state at the monitored value's best eval so far."""

    priority = 75

    def __init__(self, monitor: Monitored) -> None:
        self.monitor = monitor

    def on_fit_start(self, trainer: Trainer) -> None:
        state = trainer.state
        if state.best_monitor is None and self.monitor.name == VAL_LOSS and math.isfinite(state.best_val_loss):
            state.best_monitor = state.best_val_loss  # a checkpoint from before the monitor was recorded

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> None:
        state = trainer.state
        value = state.last_eval.get(self.monitor.name)
        if tick.eval and self.monitor.better(value, state.best_monitor):
            state.best_monitor, state.best_step = value, state.step
            trainer.save_best()

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        state = trainer.state
        return {"monitor": {"name": self.monitor.name, "mode": self.monitor.mode,
                            "best": finite_or_none(state.best_monitor), "best_step": state.best_step}}


class EarlyStop(Callback):
    """early_stop: stop when the monitored value stops improving, or the val loss diverges."""

    priority = 60  # after live diagnosis: a finding it stops on is the run's reason
    state_key = "early_stop"

    def __init__(self, early_stop: EarlyStopping, monitor: Monitored) -> None:
        self.early_stop, self.monitor = early_stop, monitor

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> Stop | None:
        if not tick.eval:
            return None
        state = trainer.state
        val, step = state.last_val_loss, state.step
        stop = self.early_stop.update(state.last_eval.get(self.monitor.name, math.nan), val)
        if stop == "diverged":
            trainer.event("diverged", f"step {step}: validation loss {val:.4g} is non-finite or above "
                                      f"early_stop.divergence_threshold; stopping")
        elif stop == "early_stopped":
            trainer.event("early_stop", f"step {step}: no {self.monitor.name} improvement > "
                                        f"{self.early_stop.min_delta} for {self.early_stop.patience} evals "
                                        f"(best {self.early_stop.best_value:.4f})")
        return Stop(stop) if stop else None

    def state_dict(self) -> dict[str, Any]:
        return self.early_stop.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.early_stop.load_state_dict(state)
