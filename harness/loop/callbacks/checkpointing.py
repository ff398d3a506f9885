"""Step checkpoints: every trainer.ckpt_every steps, at the last step and before a stop; a stop
signal (SIGTERM/SIGUSR1/SIGUSR2: preemption; SIGINT: Ctrl-C) is answered with a checkpoint and a clean exit."""
from __future__ import annotations

from typing import TYPE_CHECKING

from harness.loop.callbacks.base import Callback
from harness.loop.hooks import Stop, Tick
from harness.loop.signals import StopRequest
from harness.loop.step import StepResult

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer


class Checkpointing(Callback):
    priority = -100  # last: the checkpoint holds what every other callback did at this step

    def __init__(self, stop_request: StopRequest) -> None:
        self.stop_request = stop_request  # the signals the cadence turns into a preempting tick

    def on_fit_start(self, trainer: Trainer) -> None:
        self.stop_request.install()

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> Stop | None:
        if tick.checkpoint:
            trainer.save_checkpoint()
        if tick.preempted:
            request = self.stop_request
            if request.interrupted:
                trainer.event("interrupted", f"Ctrl-C at step {tick.step}: checkpoint saved, stopping; "
                                             f"resume=auto continues from it")
                return Stop("interrupted", save=False)
            trainer.event("preempted", f"{request.signal_name or 'signal'} at step {tick.step}: checkpoint saved, "
                                       f"stopping")
            return Stop("preempted", save=False)
        return Stop("stopped", save=False) if tick.stop else None
