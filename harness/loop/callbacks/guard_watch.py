"""The guard's verdicts, read where the state is read anyway: bad updates become events (naming
the samples that stood out), repeated ones roll the run back to its newest good state."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.training.attribution import Attribution
from harness.loop.callbacks.base import Callback
from harness.state.checkpoint import latest_valid_checkpoint, step_checkpoints
from harness.data.loader import MicroBatch
from harness.core.distributed import any_rank
from harness.training.faults import FaultInjector
from harness.training.guard import Guard, Verdict
from harness.loop.hooks import RESTORED, Restored, Stop, Tick
from harness.training.rollback_point import RollbackPoint
from harness.loop.step import StepResult

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer

ATTRIBUTED_PER_READ = 4  # skipped updates whose samples are rescored per read of the verdicts (a burst costs 4 passes)
EMPTY_EVENTS = 4  # empty updates reported as events; the rest are only counted (a padded corpus may have many)


class GuardWatch(Callback):
    priority = 100  # first: nothing reads the state before the verdicts are in
    state_key = "guard"

    def __init__(self, guard: Guard, faults: FaultInjector, attribute: Callable[[list[MicroBatch]], Attribution],
                 ignore_index: int | None) -> None:
        self.guard, self.faults, self.attribute, self.ignore_index = guard, faults, attribute, ignore_index
        self.rollback_point = RollbackPoint(guard.cfg.snapshot_every if guard.cfg.rollback_after else None)
        self.unread: dict[int, list[MicroBatch]] = {}  # step -> its micro-batches, until the verdicts are read
        self.rollback_due = False

    def on_fit_start(self, trainer: Trainer) -> None:
        no_checkpoint = any_rank(not step_checkpoints(trainer.run_dir), trainer.dist, trainer.device)  # rank 0 decides
        if self.guard.cfg.rollback_after and no_checkpoint:
            trainer.save_checkpoint()  # something to roll back to before the first periodic checkpoint
        self._snapshot_if_due(trainer)

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> Stop | Restored | None:
        if result.micro_batches is not None:
            self.unread[tick.step] = result.micro_batches
        if tick.reads_state:  # the same steps on every rank: ranks agree on rollbacks
            self.hear(trainer)
            if not self.rollback_due:
                self._snapshot_if_due(trainer)
        return self._roll_back(trainer) if self.rollback_due else None

    def before_state_read(self, trainer: Trainer) -> None:
        self.hear(trainer)  # skip events belong in the saved state

    def _snapshot_if_due(self, trainer: Trainer) -> None:
        if self.rollback_point.due(trainer.state.step, bool(self.guard.bad_steps)):
            self.rollback_point.take(trainer.state_dict(), trainer.state.step)

    def hear(self, trainer: Trainer) -> None:
        """Read the verdicts not yet read (one host read): count the bad updates, log them as
        events with their steps, and arm a rollback when they repeat."""
        bad, good_losses = trainer.window.read_verdicts()
        self.guard.remember(good_losses)
        attributed = 0
        for step, verdict in bad:
            if verdict == Verdict.OVERFLOW:  # the loss scale was too high: expected, the scaler backs off
                trainer.state.overflow_steps += 1
                continue
            if verdict == Verdict.EMPTY:
                self._note_empty(trainer, step)
                continue
            trainer.state.skipped_steps += 1
            kind, what = ("nonfinite", "non-finite loss or gradients") if verdict == Verdict.NONFINITE else (
                "spike", "loss spike")
            details: dict[str, Any] = {}
            found = self.attribute(self.unread[step]) if step in self.unread and attributed < ATTRIBUTED_PER_READ \
                else None  # None too for an open objective, which scores batches, not samples
            if found is not None:
                attributed += 1
                details = {"samples": found.samples,
                           "data_cause": any_rank(found.data_cause, trainer.dist, trainer.device)}
                what += f"; {found.describe()}"
            trainer.event(f"skip_{kind}", f"step {step}: {what}, update skipped", step, **details)
            self.rollback_due = self.guard.record_bad(step, details.get("data_cause", False)) or self.rollback_due
        self.unread.clear()

    def _note_empty(self, trainer: Trainer, step: int) -> None:
        """Count an empty update; the first EMPTY_EVENTS are events too."""
        trainer.state.empty_steps += 1
        if trainer.state.empty_steps <= EMPTY_EVENTS:
            trainer.event("skip_empty", f"step {step}: every target of the update is loss.ignore_index "
                                        f"({self.ignore_index}); nothing to learn from, update skipped as empty", step)

    def _roll_back(self, trainer: Trainer) -> Stop | Restored:
        """Repeated bad updates the model is blamed for: reload the newest good state (the guard's
        snapshot or the last checkpoint), lower the LR, keep the data moving forward."""
        self.rollback_due = False
        g, state = self.guard.cfg, trainer.state
        data = any(e.get("data_cause") for e in state.events if e["step"] in self.guard.bad_steps)
        if state.rollbacks >= g.max_rollbacks:
            advice = ("the skipped updates' samples stood out from their batches: inspect, fix or drop them (the "
                      "skip events name them)" if data else "lower optim.lr, lengthen warmup or enable clipping")
            trainer.event("diverged", f"step {state.step}: bad updates kept coming after {state.rollbacks} "
                                      f"rollback(s); {advice}")
            return Stop("diverged", save=False)
        found = latest_valid_checkpoint(trainer.run_dir)
        if self.rollback_point.newer_than(found[1]["step"] if found else None):
            source, ckpt = f"the guard's snapshot of step {self.rollback_point.step}", self.rollback_point.state
        elif found is not None:
            source, ckpt = found[0].name, found[1]
        else:
            trainer.event("diverged", f"step {state.step}: repeated bad updates and no checkpoint to roll back to")
            return Stop("diverged", save=False)
        data_position, fired = trainer.batches.state_dict(), self.faults.state_dict()
        trainer.load_state_dict(ckpt)
        trainer.batches.load_state_dict(data_position)  # skip past the batches that went bad, do not replay them
        self.faults.load_state_dict(fired)
        now = trainer.state
        now.skipped_steps, now.overflow_steps, now.empty_steps = state.skipped_steps, state.overflow_steps, \
            state.empty_steps
        now.events, now.rollbacks = state.events, state.rollbacks + 1
        now.lr_scale = state.lr_scale * g.rollback_lr_factor
        trainer.apply_lr_scale()
        self.guard.bad_steps = []
        trainer.event("rollback", f"step {state.step}: {g.rollback_after} bad updates within {g.rollback_window} "
                                  f"steps; rolled back to step {now.step} ({source}), LR x{now.lr_scale:g}",
                      data_cause=data)
        return RESTORED

    def state_dict(self) -> dict[str, Any]:
        return self.guard.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.guard.load_state_dict(state)
