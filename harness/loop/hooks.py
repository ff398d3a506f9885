"""What the loop tells its callbacks and what they can answer: the end of an update (a Tick, the
same on every rank), and a request to stop. Callbacks run in priority order, highest first."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from harness.core.distributed import DistInfo, any_rank
from harness.core.errors import HarnessError, one_line
from harness.core.typed_config import at_least, read_typed, setting

log = logging.getLogger("harness")


@dataclass(frozen=True)
class Tick:
    """The end of update `step`: what falls due there. Every rank computes the same."""

    step: int
    last: bool  # trainer.max_steps reached
    log: bool  # a logging step (the window is read)
    eval: bool
    checkpoint: bool  # periodic, last, or before a stop
    preempted: bool  # SIGTERM/SIGUSR1/SIGUSR2 seen (by any rank)
    stop: bool  # preempted, or trainer.stop_after reached

    @property
    def reads_state(self) -> bool:
        """Something reads the training state at this step (a log, an eval or a checkpoint)."""
        return self.log or self.eval or self.checkpoint


@dataclass(frozen=True)
class Stop:
    """A callback's request to end the run with `status`; `save` writes a checkpoint first; `by`
    says what stopped it, for summary.json's `stopped_by` (a finding: its name, severity and step)."""

    status: str
    save: bool = True
    by: dict[str, Any] | None = None


class Restored:
    """The training state was replaced (a rollback): the rest of this step's callbacks are skipped."""


RESTORED = Restored()


class StopRequest:
    """Set by SIGTERM, SIGUSR1 or SIGUSR2 (preemption, or a scheduler's warning before the time
    limit; submitit asks SLURM for SIGUSR2), or by Ctrl-C (SIGINT): save at the next step boundary
    and exit cleanly. A second Ctrl-C stops at once, without that checkpoint."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
                signal.signal(sig, self._handle)
            signal.signal(signal.SIGINT, self._ctrl_c)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signal_name = signal.Signals(signum).name

    def _ctrl_c(self, _signum: int, _frame: Any) -> None:
        global _interrupted
        _interrupted = True
        self.signal_name = "SIGINT"
        sys.stderr.write("\nCtrl-C: stopping after this step with a checkpoint (Ctrl-C again: stop now, "
                         "without it)\n")
        signal.signal(signal.SIGINT, _stop_now)

    @property
    def interrupted(self) -> bool:
        return self.signal_name == "SIGINT"


_interrupted = False  # Ctrl-C was pressed in this process


def interrupted_by_user() -> bool:
    """Whether Ctrl-C stopped this process's run (its exit status is then 130, as a shell expects)."""
    return _interrupted


def _stop_now(_signum: int, _frame: Any) -> None:
    sys.stderr.write("Ctrl-C again: stopped now; resume=auto continues from the last checkpoint\n")
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


EXIT_INTERRUPTED = 130  # 128 + SIGINT


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


class CallbackError(HarnessError):
    """A user's callback raised: the run stops at that step; the checkpoints written before stay valid."""


class Callbacks:
    """The loop's callbacks in priority order. A user's callback that raises stops the run with one
    line naming it; the harness's own errors keep their traceback."""

    def __init__(self, callbacks: Iterable[Any], user: dict[int, str] | None = None) -> None:
        self.all = sorted(callbacks, key=lambda cb: -getattr(cb, "priority", 0))
        self.user = user or {}  # id(callback) -> its name in the `callbacks` config

    def call(self, hook: str, *args: Any) -> Stop | Restored | None:
        """Each callback's `hook` in turn; a Stop or Restored ends the round (the trainer saves on a
        Stop). A user's callback that returns anything else is refused in one line: a stray `True`
        would otherwise skip the callbacks after it, the checkpoint among them."""
        for cb in self.all:
            method = getattr(cb, hook, None)  # a user's callback need not define every hook
            if method is None:
                continue
            try:
                answer = method(*args)
            except Exception as err:
                if id(cb) not in self.user:
                    raise
                log.debug("callback %s raised", self.user[id(cb)], exc_info=True)
                raise CallbackError(f"{self._name(cb)} raised {one_line(err)} in {hook}{self._at(args)}; the run "
                                    f"stopped, the checkpoints written before stay valid").in_user_code(err) from err
            if isinstance(answer, (Stop, Restored)):
                return answer
            if answer is not None and id(cb) in self.user:
                raise CallbackError(f"{self._name(cb)} returned {answer!r} from {hook}{self._at(args)}: a hook returns "
                                    f"None, or Stop(status) from on_step_end to end the run; the run stopped, the "
                                    f"checkpoints written before stay valid")
        return None

    def _name(self, cb: Any) -> str:
        return f"callback {self.user[id(cb)]!r} ({type(cb).__module__}.{type(cb).__name__})"

    @staticmethod
    def _at(args: tuple) -> str:
        step = args[1].step if len(args) > 1 and isinstance(args[1], Tick) else None
        return f" at step {step}" if step is not None else ""

    def collect(self, hook: str, *args: Any) -> dict[str, Any]:
        """The dicts every callback's `hook` returns, merged in priority order."""
        merged: dict[str, Any] = {}
        for cb in self.all:
            method = getattr(cb, hook, None)
            merged.update((method(*args) if method else None) or {})
        return merged

    def state_dict(self) -> dict[str, Any]:
        return {cb.state_key: cb.state_dict() for cb in self.all if getattr(cb, "state_key", None)}

    def load_state_dict(self, ckpt: dict[str, Any]) -> None:
        for cb in self.all:
            key = getattr(cb, "state_key", None)
            if key:
                cb.load_state_dict(ckpt.get(key, {}))
