"""At each eval: the validation pass and its log, best.pt when the loss improved, early stopping."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from harness.loop.callbacks.base import Callback
from harness.training.early_stop import EarlyStopping
from harness.loop.evaluation import Evaluator
from harness.loop.hooks import Stop, Tick
from harness.core.metric_names import VAL_ACCURACY, VAL_LOSS
from harness.loop.step import StepResult

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer


class Evaluation(Callback):
    priority = 80

    def __init__(self, evaluator: Evaluator) -> None:
        self.evaluator = evaluator

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> None:
        if not tick.eval:
            return
        measured = self.evaluator.evaluate()
        state = trainer.state
        state.last_val_loss = measured[VAL_LOSS]
        if trainer.tracker:
            trainer.tracker.log(state.step, measured, kind="eval")
        if VAL_ACCURACY in measured:
            state.best_val_accuracy = max(measured[VAL_ACCURACY], state.best_val_accuracy or 0.0)

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        return self.evaluator.summary()

    def close(self) -> None:
        self.evaluator.close()


class BestCheckpoint(Callback):
    """best.pt (best.dcp when sharded): the state at the lowest validation loss so far."""

    priority = 75

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> None:
        state = trainer.state
        if tick.eval and math.isfinite(state.last_val_loss) and state.last_val_loss < state.best_val_loss:
            state.best_val_loss = state.last_val_loss
            trainer.save_best()


class EarlyStop(Callback):
    """early_stop: stop when the val loss stops improving, or diverges."""

    priority = 60  # after live diagnosis: a finding it stops on is the run's reason
    state_key = "early_stop"

    def __init__(self, early_stop: EarlyStopping) -> None:
        self.early_stop = early_stop

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> Stop | None:
        if not tick.eval:
            return None
        val, step = trainer.state.last_val_loss, trainer.state.step
        stop = self.early_stop.update(val)
        if stop == "diverged":
            trainer.event("diverged", f"step {step}: validation loss {val:.4g} is non-finite or above "
                                      f"early_stop.divergence_threshold; stopping")
        elif stop == "early_stopped":
            trainer.event("early_stop", f"step {step}: no val improvement > {self.early_stop.min_delta} "
                                        f"for {self.early_stop.patience} evals (best {self.early_stop.best:.4f})")
        return Stop(stop) if stop else None

    def state_dict(self) -> dict[str, Any]:
        return self.early_stop.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.early_stop.load_state_dict(state)
