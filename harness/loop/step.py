"""One optimizer update, in the order that keeps it correct: micro-batches, unscale, the pre-clip
norm, the guard's verdict, clip, step or skip, the loss scale, the schedule, zero_grad.

Nothing here reads a value off the device (guard.py says when a read cannot be avoided), and the
step counter is not here: the loop owns it (trainer.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from harness.training.clipping import clip_gradients, global_grad_norm
from harness.data.batch import to_device
from harness.data.loader import MicroBatch
from harness.core.distributed import DistInfo, all_reduce_mean, gradient_sync
from harness.training.faults import FaultInjector
from harness.training.guard import Guard, Verdict, skips_on_device
from harness.models.output import OutputPicker
from harness.training.monitor import Monitor
from harness.training.objective import Objective
from harness.training.part_shares import gradient_shares
from harness.training.precision import Precision
from harness.training.schedule import LiveLR


class BatchSource(Protocol):
    """Where an update's micro-batches come from: the run's stream, or the doctor's fixed batches."""

    def next_update(self) -> list[MicroBatch]: ...

    def fetch(self, mb: MicroBatch) -> tuple[Any, torch.Tensor | None]: ...


@dataclass(frozen=True)
class StepResult:
    """What one update did; the tensors stay on the device until a logging step reads them."""

    step: int
    loss: torch.Tensor  # the update's mean loss over its counted targets
    parts: dict[str, torch.Tensor]  # the objective's named parts, weighted as the loss is
    grad_norm: torch.Tensor  # global norm before clipping
    verdict: torch.Tensor  # a Verdict code
    judged_loss: torch.Tensor  # the loss the guard judged (averaged over ranks)
    clipped: torch.Tensor | None = None  # clip_mode=norm: whether the norm was over the threshold
    lr: float | None = None  # the first param group's LR as the optimizer used it (None: no update ran)
    scale_dropped: torch.Tensor | None = None  # fp16: the scaler backed off after an applied update
    post_clip_norm: torch.Tensor | None = None  # measured on logging steps for clip modes other than norm
    without_grad: int | None = None  # logging steps: trainable tensors the loss never reached
    micro_batches: list[MicroBatch] | None = None  # with the guard on: which samples a skipped update held
    part_shares: dict[str, torch.Tensor] | None = None  # monitor steps, multi-part objectives: gradient shares


@dataclass(frozen=True)
class ClipSettings:
    threshold: float  # 0: off
    mode: str  # norm | value | layer | adaptive
    mean_reduction: bool  # accum_reduction=mean (sum is the bug demo)


class TrainStep:
    """The update itself. Its instruments (the monitor, fault injection) hook in where they must:
    activations during the forward, gradients after backward, updates after the step."""

    def __init__(self, *, model: nn.Module, params: list[nn.Parameter], optimizer: torch.optim.Optimizer,
                 live_lr: LiveLR, precision: Precision, guard: Guard,
                 objective: Objective, pick_output: OutputPicker, clip: ClipSettings,
                 monitor: Monitor, log_every: int, faults: FaultInjector, device: torch.device,
                 dist: DistInfo) -> None:
        self.model, self.params, self.optimizer, self.live_lr = model, params, optimizer, live_lr
        self.precision, self.scaler, self.guard = precision, precision.scaler, guard
        self.objective, self.pick_output = objective, pick_output
        self.clip, self.monitor, self.log_every = clip, monitor, log_every
        self.faults, self.device, self.dist = faults, device, dist
        self.skip_on_device = skips_on_device(optimizer)
        # 0 and 1 on the device, picked by a host-side fact without copying it over each step
        self._has_targets = (torch.zeros((), device=device), torch.ones((), device=device))

    def run(self, step: int, batches: BatchSource, log_step: bool) -> StepResult:
        """The update numbered `step`; `log_step` allows the reads a logging step may make."""
        monitoring = log_step and self.monitor.due(step, self.log_every)
        self.faults.arm(step)
        micro_batches = batches.next_update()
        fetched = [batches.fetch(mb) for mb in micro_batches]
        shares = self.objective.shares([y for _, y in fetched])
        if self.dist.world_size > 1:
            shares = self._weighed_across_ranks([y for _, y in fetched], shares)
        if shares is None and self.dist.world_size == 1:
            return self._skip_empty(step)
        loss, parts, part_shares = self._forward_backward(fetched, shares or [0.0] * len(fetched), monitoring)
        self.faults.on_grads(self.params)
        without_grad = sum(p.grad is None for p in self.params) if log_step else None  # a host-side count

        self.scaler.unscale_(self.optimizer)  # fp16: clipping and norms must see true gradients
        grad_norm = global_grad_norm(self.params)  # pre-clip, on the device
        verdict, judged_loss = self.guard.judge(loss, grad_norm, self.precision.scaling)
        if self.guard.enabled and self.dist.world_size > 1:  # empty on every rank: skipped like a bad update
            counted = self._has_targets[shares is not None]
            verdict = torch.where(all_reduce_mean(counted, self.dist) > 0, verdict, Verdict.EMPTY)
        ok = verdict == Verdict.OK
        monitoring = monitoring and bool(ok)  # a logging step: reading is allowed
        if monitoring:
            self.monitor.after_backward()
        post_clip_norm = clipped = None
        if self.clip.threshold:
            clip_gradients(self.params, self.clip.mode, self.clip.threshold, grad_norm)
            if log_step and self.clip.mode != "norm":
                post_clip_norm = global_grad_norm(self.params)
            if self.clip.mode == "norm":
                clipped = grad_norm > self.clip.threshold
        lr = self.optimizer.param_groups[0]["lr"]
        self._step_unless_bad(ok)  # a bad update moves neither parameters nor moments
        scale_dropped = self._update_loss_scale(ok)
        self.live_lr.advance()  # counts optimizer updates, skipped ones included
        self.optimizer.zero_grad(set_to_none=True)
        if monitoring:
            self.monitor.after_step()
        return StepResult(step, loss, parts, grad_norm, verdict, judged_loss, clipped, lr, scale_dropped,
                          post_clip_norm, without_grad, micro_batches if self.guard.enabled else None, part_shares)

    def _forward_backward(self, fetched: list[tuple[Any, Any]], shares: list[float | torch.Tensor], monitoring: bool
                          ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor] | None]:
        """Accumulate the gradients of one batch's mean loss; returns that loss, its parts and, on a
        monitor step of a multi-part objective, the parts' gradient shares (all on the device)."""
        loss, parts, count, shares_of_parts = None, {}, None, None
        for k, ((x, y), share) in enumerate(zip(fetched, shares)):
            last = k == len(fetched) - 1
            x, y = to_device(x, self.device, non_blocking=True), to_device(y, self.device, non_blocking=True)
            # Under DDP, gradients are all-reduced only after the last micro-batch's backward.
            with gradient_sync(self.model, sync=last), self.monitor.capture_forward(monitoring and last):
                with self.precision.autocast():
                    scored = self.objective.score(self.model, x, y)
                    micro_loss = self.faults.on_loss(scored.loss)
                if monitoring and last and len(scored.parts) > 1 and self.dist.world_size == 1:
                    shares_of_parts = gradient_shares(scored.parts, micro_loss, self.params)
                if scored.count is not None:  # a sum: the whole update's count divides it below
                    share = 1.0
                    count = scored.count if count is None else count + scored.count
                # Weighted by its share of the counted targets, the micro-batches' gradients sum to
                # the gradient of the whole batch's mean loss (accum_reduction=sum skips this: a bug demo).
                self.scaler.scale(micro_loss * (share if self.clip.mean_reduction else 1.0)).backward()
            part = micro_loss.detach() * share
            loss = part if loss is None else loss + part
            for name, value in scored.parts.items():
                parts[name] = parts.get(name, 0.0) + value.detach().float() * share
        if count is not None:
            loss, parts = self._per_counted_item(loss, parts, count)
        return loss, parts, shares_of_parts

    def _weighed_across_ranks(self, targets: list[Any], shares: list[float] | None
                              ) -> list[float | torch.Tensor] | None:
        """Ranks may count different numbers of targets (padding at ignore_index): each rank's loss
        weighs by its count over the ranks' mean count, so that DDP's mean of the ranks' gradients,
        and the logged mean of their losses, are the mean over every rank's counted targets, as in
        one process. The count is all-reduced on the device: the host waits for nothing."""
        counted = self.objective.counted_targets(targets)
        if counted is None:
            return shares
        count = torch.tensor(float(counted), device=self.device)
        weight = count / all_reduce_mean(count, self.dist).clamp(min=1.0)
        return None if shares is None else [share * weight for share in shares]

    def _per_counted_item(self, loss: torch.Tensor, parts: dict[str, torch.Tensor],
                          count: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """An objective that counts returned sums: the gradients become those of the mean over every
        rank's counted items (DDP averaged them over ranks, so they are divided by the ranks' mean
        count), and so does the loss: this rank's sum over that mean count, whose mean over ranks
        is the mean over every rank's items."""
        count = count.to(self.device, torch.float32)
        mean_count = (all_reduce_mean(count, self.dist) if self.dist.world_size > 1 else count).clamp(min=1.0)
        grads = [p.grad for p in self.params if p.grad is not None]
        if grads:
            torch._foreach_div_(grads, mean_count)
        return loss / mean_count, {name: value / mean_count for name, value in parts.items()}

    def _skip_empty(self, step: int) -> StepResult:
        """An update whose every target is the ignore index has nothing to learn from: no forward,
        no step; the schedule still advances, as for any skipped update, and the log counts it."""
        self.live_lr.advance()
        zero = torch.zeros((), device=self.device)
        return StepResult(step, zero, {}, zero, torch.tensor(Verdict.EMPTY, device=self.device), zero)

    def _step_unless_bad(self, ok: torch.Tensor) -> None:
        """Apply the update only when the guard found it good."""
        if not self.guard.enabled:
            self.scaler.step(self.optimizer)  # fp16: the scaler still skips overflows by itself
        elif self.skip_on_device:
            # Fused optimizers skip inside step() when found_inf is 1 (GradScaler's own mechanism):
            # parameters, moments and step counts stay as they were, and the host reads nothing.
            # The gradients are already unscaled, so the scaler's step is not needed.
            self.optimizer.found_inf = (~ok).float()
            self.optimizer.step()
            del self.optimizer.found_inf
        elif ok:  # the update's one host read: this optimizer cannot skip on the device
            self.scaler.step(self.optimizer)

    def _update_loss_scale(self, ok: torch.Tensor) -> torch.Tensor | None:
        """fp16: back off after an overflow, grow after a quiet stretch. Overflows the guard did
        not already catch (guard off) show as the scale shrinking after an applied update."""
        if not self.precision.scaling:
            return None
        before = self.scaler._get_scale_async().clone()
        self.scaler.update()
        return (self.scaler._get_scale_async() < before) & ok

