"""What the loop tells its callbacks and what they can answer: the end of an update (a Tick, the
same on every rank), and a request to stop. Callbacks run in priority order, highest first."""
from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from harness.core.errors import HarnessError, one_line

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
