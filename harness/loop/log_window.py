"""What happens between two logging steps, kept on the device until the host reads it.

Per update the trainer adds the loss, the pre-clip grad norm and the guard's verdict; nothing
here reads a value. The host reads the verdicts at boundaries (logging, eval, checkpoint: one
`tolist`) and the sums at logging steps, so non-logging steps cost no host sync.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from harness.core.metric_names import TRAIN_LOSS_PART
from harness.training.guard import Verdict
from harness.loop.step import StepResult

# What `close` returns, in the order the device holds it: the sums, then the peaks.
WINDOW_FIELDS = ("loss_sum", "clipped", "overflows", "loss_max", "norm_max")
LOSS_SUM, CLIPPED, OVERFLOWS = range(3)  # positions in `sums`


class LogWindow:
    def __init__(self, device: torch.device) -> None:
        # the loss summed over applied updates, updates clipped, fp16 overflows the guard did not see
        self.sums = torch.zeros(3, device=device)
        self.peaks = torch.zeros(2, device=device)  # [largest loss, largest pre-clip grad norm]
        self.verdicts: list[tuple[int, torch.Tensor, torch.Tensor]] = []  # (step, Verdict code, loss) not yet read
        self.applied = 0  # updates applied in this window, as far as the verdicts were read
        self.steps = 0  # updates in this window
        self.last_grad_norm = torch.zeros((), device=device)
        self.started = time.perf_counter()
        self.timed_seconds, self.timed_updates = 0.0, 0  # over this invocation's closed windows
        self.first_loss: torch.Tensor | None = None  # the run's first update: the untrained model's loss
        self.part_sums: dict[str, torch.Tensor] = {}  # an objective's parts, summed over applied updates

    def add(self, result: StepResult) -> None:
        """Accumulate one update on the device (no host read); its `judged_loss` is the one the
        guard judged (averaged over ranks), which joins its spike window when the update was good."""
        loss, grad_norm = result.loss, result.grad_norm
        if result.step == 1:
            self.first_loss = loss.detach().clone()
        ok = result.verdict == Verdict.OK
        if result.scale_dropped is not None:  # an fp16 overflow the guard did not see
            self.sums[OVERFLOWS] += result.scale_dropped
        self.sums[LOSS_SUM] += torch.where(ok, loss, 0.0)
        for name, value in result.parts.items():
            total = self.part_sums.get(name)
            applied = torch.where(ok, value, 0.0)
            self.part_sums[name] = applied if total is None else total + applied
        if result.clipped is not None:
            self.sums[CLIPPED] += result.clipped & ok
        torch.maximum(self.peaks, torch.stack([loss, grad_norm]), out=self.peaks)  # a spike inside a window shows
        self.verdicts.append((result.step, result.verdict, result.judged_loss))
        self.last_grad_norm = grad_norm
        self.steps += 1

    def read_verdicts(self) -> tuple[list[tuple[int, int]], list[float]]:
        """Since the last read: (step, Verdict code) of the bad updates, and the judged losses of
        the good ones. One host read, or none when nothing is pending."""
        if not self.verdicts:
            return [], []
        steps, codes, losses = zip(*self.verdicts)
        self.verdicts = []
        read = torch.stack([torch.stack(codes).to(losses[0].dtype), torch.stack(losses)]).tolist()
        codes, losses = [round(code) for code in read[0]], read[1]
        self.applied += codes.count(Verdict.OK)
        bad = [(step, code) for step, code in zip(steps, codes) if code != Verdict.OK]
        return bad, [loss for loss, code in zip(losses, codes) if code == Verdict.OK]

    def close(self) -> tuple[dict[str, torch.Tensor], int, float]:
        """(WINDOW_FIELDS by name, then the parts' sums by metric name; updates applied, seconds per
        update) of the window; starts the next. Call after `read_verdicts`, so that `applied` is complete."""
        values = dict(zip(WINDOW_FIELDS, torch.cat([self.sums, self.peaks])))
        values.update((TRAIN_LOSS_PART + name, total) for name, total in self.part_sums.items())
        self.part_sums = {}
        applied, steps = self.applied, self.steps
        now = time.perf_counter()
        seconds = (now - self.started) / max(steps, 1)
        self.timed_seconds += now - self.started if steps else 0.0
        self.timed_updates += steps
        self.sums.zero_()
        self.peaks.zero_()
        self.applied, self.steps, self.started = 0, 0, now
        return values, applied, seconds

    def unread_overflows(self) -> int:
        """fp16 overflows the guard did not see, counted since the last logging step (one read)."""
        return round(self.sums[OVERFLOWS].item())

    def restart_clock(self) -> None:
        self.started = time.perf_counter()

    def state_dict(self) -> dict[str, Any]:
        """Unread verdicts are not part of it: read them first."""
        return {"sums": self.sums.cpu(), "peaks": self.peaks.cpu(), "applied": self.applied,
                "steps_since_log": self.steps, "part_sums": {k: v.cpu() for k, v in self.part_sums.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sums.copy_(state["sums"])
        self.peaks.copy_(state["peaks"])
        self.applied = state["applied"]
        self.steps = state["steps_since_log"]
        self.part_sums = {k: v.to(self.sums.device) for k, v in state.get("part_sums", {}).items()}
        self.verdicts = []
