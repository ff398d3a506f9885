"""The hooks a callback may define; each is optional. Subclass `Callback` and add yours with the
`callbacks` config node (docs/bring-your-own.md, Example 4). `HOOKS` names every hook the loop
calls, in the order a step meets them; a test holds it to the loop's calls."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.loop.hooks import Restored, Stop, Tick
from harness.loop.step import StepResult

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer


class Callback:
    priority: int = 0  # higher runs first; the harness's own run at 10-100, checkpoints last (-100)
    state_key: str | None = None  # the checkpoint entry its state_dict goes under (None: no state)

    def on_fit_start(self, trainer: Trainer) -> None:
        """Before the first update of this invocation (after a resume, too)."""

    def on_step_start(self, trainer: Trainer, step: int) -> None:
        """Before update `step` (a timer starts here)."""

    def on_update(self, trainer: Trainer, result: StepResult) -> None:
        """Right after the update, before anything reads it (a timer stops here)."""

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> Stop | Restored | None:
        """After update `tick.step`; return Stop(status) to end the run (a checkpoint is written
        first), None otherwise: any other value is refused."""
        return None

    def before_state_read(self, trainer: Trainer) -> None:
        """Before the training state is read (a checkpoint or a snapshot): settle what is pending."""

    def on_checkpoint_saved(self, trainer: Trainer, step: int) -> None:
        """A step checkpoint of `step` is on disk, on every rank's word (copy it elsewhere here)."""

    def on_error(self, trainer: Trainer, error: BaseException) -> None:
        """The run failed with `error` (raised again after every callback saw it): alert, clean up."""

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        """Fields this callback adds to summary.json."""
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """`state` is what state_dict returned ({} for a checkpoint written without this callback)."""

    def close(self) -> None:
        """The run is over: release what the callback holds."""


HOOKS = ("on_fit_start", "on_step_start", "on_update", "on_step_end", "before_state_read", "on_checkpoint_saved",
         "on_error", "summary", "close")
