"""The training loop: update, advance the step counter, tell the callbacks, stop when one asks.

Everything else plugs in. The update itself is harness/loop/step.py; checkpoints, evals, the guard's
verdicts and rollbacks, logging, live diagnosis and sweep pruning are callbacks
(harness/loop/callbacks/), each acting on its own cadence; assembly.py builds it all. Host syncs
are deliberate: metrics and the guard's verdicts stay on the device until a logging step (or an
eval or checkpoint) reads them.
"""
from __future__ import annotations

import copy
import logging
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from harness.state.checkpoint import CheckpointWriter, rng_state, set_rng_state
from harness.data import DataMeta
from harness.data.loader import TrainBatches
from harness.core.distributed import DistInfo, all_gather_objects
from harness.loop.hooks import CallbackError, Callbacks, Stop
from harness.loop.cadence import Cadence
from harness.loop.log_window import LogWindow
from harness.training.parallel import class_name
from harness.loop.step import BatchSource, StepResult, TrainStep
from harness.logger.tracking import Tracker, finite_or_none

log = logging.getLogger("harness")


@dataclass
class TrainState:
    """Counters that must survive a resume."""

    step: int = 0  # optimizer updates done
    best_val_loss: float = math.inf
    best_val_accuracy: float | None = None
    last_val_loss: float | None = None
    last_eval: dict[str, float] = field(default_factory=dict)  # what the last eval measured, by name (val/f1)
    best_metrics: dict[str, float] = field(default_factory=dict)  # each measured name's best, where its mode is known
    best_monitor: float | None = None  # trainer.monitor's best, whose state best.pt holds
    best_step: int | None = None  # the step of that eval
    baseline: dict[str, float] = field(default_factory=dict)  # the untrained model's eval, before the first update
    last_train_loss: float | None = None
    skipped_steps: int = 0  # updates skipped by the guard (NaN/Inf or loss spike)
    overflow_steps: int = 0  # fp16 updates skipped by the loss scaler
    empty_steps: int = 0  # updates skipped because every target was the ignore index
    rollbacks: int = 0
    lr_scale: float = 1.0  # product of the rollbacks' LR factors
    events: list[dict[str, Any]] = field(default_factory=list)
    ended: str | None = None  # the status a stop ended the run with, in the checkpoint written at that stop
    stopped_by: dict[str, Any] | None = None  # what a callback's stop named (a finding: name, severity, step)


class Trainer:
    """The loop's state and the parts it uses. What other modules read of it: `state` (the one record
    callbacks write), `tracker`, `window`, `batches`, `run_dir`, `dist`, `device` and `raw_model`; the
    rest is the loop's own (tests/unit/loop/test_trainer_seams.py holds that list). Whatever else a mode needs
    from the build (the datasets, the optimizer, the unwrapped model) comes from the builder's
    Assembly, not from here."""

    def __init__(self, *, config: dict[str, Any], checkpoints_kept: int, train_step: TrainStep, batches: TrainBatches,
                 cadence: Cadence, callbacks: Callbacks, parts: dict[str, Any], checkpoints: CheckpointWriter,
                 meta: DataMeta, raw_model: nn.Module,
                 device: torch.device, dist: DistInfo, run_dir: Path, tracker: Tracker | None,
                 facts: dict[str, Any] | None = None) -> None:
        self.config, self.checkpoints_kept = config, checkpoints_kept  # resolved: what a checkpoint records of its run
        self.train_step, self.batches, self.cadence, self.callbacks = train_step, batches, cadence, callbacks
        self.checkpoints = checkpoints
        self.parts = parts  # checkpoint entry -> the component that saves and loads it (model, optimizer, ...)
        self.meta, self.raw_model, self.device, self.dist, self.run_dir = meta, raw_model, device, dist, run_dir
        self.tracker = tracker  # rank 0 of a training run; None elsewhere
        self.facts = facts or {}  # measured at build time for the diagnosis (assembly.py)
        self.state = TrainState()
        self.window = LogWindow(device)  # the updates since the last read, on the device

    # ------------------------------------------------------------------ the loop
    def fit(self) -> str:
        """Train until trainer.max_steps or a callback's stop; returns the run's status. A failure is
        shown to every callback's on_error, then raised again."""
        try:
            return self._fit()
        except BaseException as err:
            try:
                self.callbacks.call("on_error", self, err)
            except CallbackError as hook_err:  # the run's own failure stays the one raised
                log.error("%s", hook_err)
            raise

    def _fit(self) -> str:
        self.cadence.start_step = self.state.step
        self.callbacks.call("on_fit_start", self)
        if self.state.ended:  # resumed from the checkpoint its stop wrote: a kill came before summary.json
            return self.state.ended
        while self.state.step < self.cadence.max_steps:
            result = self.update()
            outcome = self.callbacks.call("on_step_end", self, self.cadence.tick(self.state.step), result)
            if isinstance(outcome, Stop):
                self.state.stopped_by = outcome.by
                if outcome.save:
                    self.state.ended = outcome.status
                    self.save_checkpoint()
                return outcome.status
        return "completed"

    def update(self, batches: BatchSource | None = None) -> StepResult:
        """One optimizer update, from the run's batches unless `batches` are given (the doctor's
        fixed ones). The step counter advances here and nowhere else."""
        step = self.state.step + 1
        self.callbacks.call("on_step_start", self, step)
        result = self.train_step.run(step, batches or self.batches, self.cadence.is_log_step(step))
        self.state.step = step
        self.window.add(result)
        self.callbacks.call("on_update", self, result)
        return result

    def advance(self, batches: BatchSource | None = None) -> bool:
        """One update and what falls due at its end, except evals and checkpoints: what `fit` does
        per step, for benchmarks and tests that drive the trainer themselves. True when it logged."""
        result = self.update(batches)
        tick = self.cadence.tick(self.state.step)
        self.callbacks.call("on_step_end", self, replace(tick, eval=False, checkpoint=False, stop=False), result)
        return tick.log

    def settle(self) -> None:
        """Settle what is pending on the device (the guard's verdicts) into the state."""
        self.callbacks.call("before_state_read", self)

    def event(self, kind: str, message: str, step: int | None = None, **details: Any) -> None:
        """Something the run should remember (summary.json's events) and show (console, TensorBoard)."""
        step = self.state.step if step is None else step
        self.state.events.append({"step": step, "kind": kind, "message": message, **details})
        if self.tracker:
            self.tracker.text(f"events/{kind}", message, step)
        else:
            log.warning(message)

    def log_scalars(self, scalars: dict[str, float], kind: str = "custom") -> None:
        """Log metrics of your own at this step (metrics.jsonl rows of `kind`, TensorBoard); rank 0
        of a training run logs, other ranks and modes ignore it."""
        if self.tracker:
            self.tracker.log(self.state.step, scalars, kind=kind)

    def apply_lr_scale(self) -> None:
        """Base LRs are the optimizer's initial LRs times the rollbacks' factor; the schedule multiplies on top."""
        self.train_step.live_lr.rescale(self.state.lr_scale)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        self.settle()
        return {
            "step": self.state.step,
            **{key: part.state_dict() for key, part in self.parts.items()},
            "rng": all_gather_objects(rng_state(), self.dist),  # one per rank
            "trainer": asdict(self.state),
            "window": self.window.state_dict(),
            **self.callbacks.state_dict(),
            "config": copy.deepcopy(self.config),
        }

    def load_state_dict(self, ckpt: dict[str, Any]) -> None:
        configured = [dict(group) for group in self.train_step.optimizer.param_groups]  # what this run's config asks for
        for key, part in self.parts.items():
            part.load_state_dict(ckpt[key])
        self._keep_configured_hyperparameters(configured)
        self.state = TrainState(**ckpt["trainer"])
        self.callbacks.load_state_dict(ckpt)
        self.window.load_state_dict(ckpt["window"])
        # Same world size: each rank continues its own streams. Another world size still resumes
        # (same data order; weights and optimizer are replicated) but dropout draws differ.
        per_rank = ckpt["rng"]
        set_rng_state(per_rank[self.dist.rank] if len(per_rank) == self.dist.world_size else per_rank[0])

    def _keep_configured_hyperparameters(self, configured: list[dict[str, Any]]) -> None:
        """The config is the truth: a checkpoint's optimizer state carries the hyperparameters it
        was trained with, so a run resumed with another optim.lr (the classic "restart from the last
        good checkpoint with a lower LR"), weight decay or betas would silently keep the old ones.
        The config's win; the rollbacks' LR factor and the schedule still apply on top."""
        changed: dict[str, tuple[Any, Any]] = {}
        for group, fresh in zip(self.train_step.optimizer.param_groups, configured):
            for key, value in fresh.items():
                if key not in ("params", "lr") and _differs(group.get(key), value):
                    changed.setdefault("optim.lr" if key == "initial_lr" else f"optim.{key}", (group.get(key), value))
                    group[key] = value
        if changed:
            self.apply_lr_scale()
            log.info("resumed with the config's optimizer settings, not the checkpoint's: %s",
                     ", ".join(f"{key} {old} -> {new}" for key, (old, new) in changed.items()))

    def save_checkpoint(self) -> None:
        """All ranks build the state (it gathers their RNG states); the writer decides who writes
        (rank 0 a whole file, or every rank its shards)."""
        self.checkpoints.step(self.state_dict(), self.run_dir, self.state.step, self.checkpoints_kept)
        self.callbacks.call("on_checkpoint_saved", self, self.state.step)

    def save_best(self) -> None:
        """checkpoints/best.pt (or best.dcp): the state at the monitor's best eval so far."""
        self.checkpoints.best(self.state_dict(), self.run_dir)

    def summary(self, status: str) -> dict[str, Any]:
        """What summary.json says of the run so far (run.py adds wall time and the objective)."""
        s = self.state
        return {
            "status": status,
            "reason": s.events[-1]["message"] if status not in ("completed", "running") and s.events else None,
            "stopped_by": s.stopped_by,
            "steps": s.step,
            "max_steps": self.cadence.max_steps,
            "best_val_loss": finite_or_none(s.best_val_loss),
            "final_val_loss": finite_or_none(s.last_val_loss),
            "final_train_loss": finite_or_none(s.last_train_loss),
            "best_val_accuracy": s.best_val_accuracy,
            "skipped_steps": s.skipped_steps,
            "overflow_steps": s.overflow_steps + self.window.unread_overflows(),
            "empty_steps": s.empty_steps,
            "events": s.events,
            "task": self.meta.task,
            "loss_function": self.meta.loss_function,
            "chance_loss": self.meta.chance_loss,
            "prior_loss": self.meta.prior_loss,
            "optimum_loss": self.meta.optimum_loss,
            "user_loss": self.meta.user_loss,
            "modules": sorted({class_name(m) for m in self.raw_model.modules()}),  # what the rules may ask of
            **self.facts,
            **self.callbacks.collect("summary", self),
        }

    def close(self) -> None:
        """Stop the data workers and flush the logs; the trainer is not used afterwards."""
        self.batches.close()
        self.callbacks.call("close")
        if self.tracker:
            self.tracker.close()


def _differs(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b))
    return a != b
