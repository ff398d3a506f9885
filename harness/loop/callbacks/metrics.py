"""The log window read at logging steps (the loop's one host sync), throughput and MFU, and the
run's mean throughput for summary.json."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from harness.loop.callbacks.base import Callback
from harness.core.distributed import DistInfo, all_reduce_mean
from harness.training.perf import mfu
from harness.loop.hooks import Stop, Tick
from harness.core.metric_names import (GRAD_CLIP_RATE, GRAD_NORM_MAX, GRAD_NORM_POSTCLIP, GRAD_NORM_PRECLIP,
                                       GRAD_SHARE, GRAD_TENSORS_WITHOUT, PERF_MFU, PERF_SAMPLES, PERF_STEP_MS,
                                       PERF_TOKENS, TRAIN_EMPTY, TRAIN_EPOCH, TRAIN_LOSS, TRAIN_LOSS_FIRST,
                                       TRAIN_LOSS_MAX, TRAIN_LOSS_PART, TRAIN_LOSS_SCALE, TRAIN_LR, TRAIN_OVERFLOWS,
                                       TRAIN_SKIPPED)
from harness.training.monitor import Monitor
from harness.training.precision import Precision
from harness.loop.step import ClipSettings, StepResult

if TYPE_CHECKING:
    from harness.loop.trainer import Trainer


class MetricsLog(Callback):
    priority = 90  # after the guard's verdicts are read: `applied` must be complete

    def __init__(self, *, monitor: Monitor, precision: Precision, clip: ClipSettings, batch_size: int,
                 tokens_per_sample: int | None, peak: float | None, flops: float | None, device: torch.device,
                 dist: DistInfo) -> None:
        self.monitor, self.precision, self.clip, self.dist = monitor, precision, clip, dist
        self.batch_size, self.tokens_per_sample = batch_size, tokens_per_sample  # tokens: language models only
        # MFU needs the device's peak; the FLOPs of one update on this rank come in closed form
        # (the built-in GPT) or are counted on the first update (any other model)
        self.peak, self.flops = peak, flops
        self._counter: FlopCounterMode | None = None
        # the last update's values that only some updates carry (an empty update runs no optimizer)
        self.lr, self.without_grad = 0.0, 0
        self.post_clip_norm = torch.zeros((), device=device)
        self.part_shares: dict[str, torch.Tensor] = {}  # a multi-part objective's, from the last monitor step

    def on_fit_start(self, trainer: Trainer) -> None:
        trainer.window.restart_clock()

    def on_step_start(self, trainer: Trainer, step: int) -> None:
        if self.peak and self.flops is None:  # counted on this invocation's first update
            self._counter = FlopCounterMode(display=False)
            self._counter.__enter__()

    def on_update(self, trainer: Trainer, result: StepResult) -> None:
        if self._counter is not None:
            self._counter.__exit__(None, None, None)
            self.flops, self._counter = self._counter.get_total_flops(), None
        if result.lr is not None:
            self.lr = result.lr
        if result.without_grad is not None:
            self.without_grad = result.without_grad
        if result.post_clip_norm is not None:
            self.post_clip_norm = result.post_clip_norm
        if result.part_shares is not None:
            self.part_shares = result.part_shares

    def on_step_end(self, trainer: Trainer, tick: Tick, result: StepResult) -> Stop | None:
        if tick.log and not self.write(trainer):
            return Stop("diverged")
        return None

    def write(self, trainer: Trainer) -> bool:
        """Read the window off the device (the log step's sync) and log it; False when the loss
        went non-finite. The guard's verdicts must have been read first."""
        window = trainer.window
        pre = window.last_grad_norm
        monitored, histograms = self.monitor.pop()
        if window.first_loss is not None:  # read with the first window: where the blow-up test starts
            monitored[TRAIN_LOSS_FIRST], window.first_loss = window.first_loss, None
        monitored.update((GRAD_SHARE + name, share) for name, share in self.part_shares.items())
        self.part_shares = {}
        sums, applied, seconds = window.close()
        names = [*sums, "pre_norm", "post_norm", *monitored]
        values = torch.stack([*sums.values(), pre, self._post_clip_norm(pre), *monitored.values()])
        read = dict(zip(names, all_reduce_mean(values, self.dist).tolist()))
        state = trainer.state
        state.overflow_steps += round(read["overflows"])
        clipped = read["clipped"]
        if self.clip.threshold and self.clip.mode != "norm":
            clipped = float(read["post_norm"] < read["pre_norm"]) * applied  # sampled on the logging step
        train_loss = read["loss_sum"] / applied if applied else None  # None: every update of the window was skipped
        if train_loss is not None:
            state.last_train_loss = train_loss
        scalars = {
            TRAIN_LR: self.lr,
            GRAD_NORM_PRECLIP: read["pre_norm"],
            GRAD_NORM_POSTCLIP: read["post_norm"],
            GRAD_NORM_MAX: read["norm_max"],
            GRAD_CLIP_RATE: clipped / max(applied, 1),
            TRAIN_SKIPPED: float(state.skipped_steps),
            PERF_STEP_MS: 1000 * seconds,
            TRAIN_EPOCH: trainer.batches.stream.epochs_done(),
            GRAD_TENSORS_WITHOUT: float(self.without_grad),
        }
        if train_loss is not None:
            parts = {name: read[name] / applied for name in sums if name.startswith(TRAIN_LOSS_PART)}
            scalars = {TRAIN_LOSS: train_loss, **parts, TRAIN_LOSS_MAX: read["loss_max"], **scalars}
        scalars.update(self._throughput(seconds))
        if state.empty_steps:
            scalars[TRAIN_EMPTY] = float(state.empty_steps)
        if self.precision.scaling:
            scalars[TRAIN_LOSS_SCALE] = float(self.precision.scaler.get_scale())
            scalars[TRAIN_OVERFLOWS] = float(state.overflow_steps)
        scalars.update((name, read[name]) for name in monitored)
        if trainer.tracker:
            trainer.tracker.log(state.step, scalars)
            trainer.tracker.histograms(state.step, histograms)
        if train_loss is not None and not math.isfinite(train_loss):
            trainer.event("diverged", f"step {state.step}: training loss is {train_loss}; stopping")
            return False
        return True

    def _post_clip_norm(self, pre_norm: torch.Tensor) -> torch.Tensor:
        """The norm the optimizer saw; computed at log time only. For clip_mode=norm it is the
        closed form of what clip_grads_with_norm_ did; other modes clip per element or per
        tensor, so their post-clip norm is only known on the logging step itself."""
        if not self.clip.threshold:
            return pre_norm
        if self.clip.mode == "norm":
            return pre_norm * torch.clamp(self.clip.threshold / (pre_norm + 1e-6), max=1.0)
        return self.post_clip_norm

    def _throughput(self, seconds_per_update: float) -> dict[str, float]:
        """tokens/s (language models) or samples/s, and MFU when the device's peak is known."""
        samples_per_s = self.batch_size / max(seconds_per_update, 1e-9)
        rate = {PERF_TOKENS: samples_per_s * self.tokens_per_sample} if self.tokens_per_sample else {
            PERF_SAMPLES: samples_per_s}
        if self.peak and self.flops:
            rate[PERF_MFU] = mfu(self.flops, seconds_per_update, self.peak)
        return rate

    def summary(self, trainer: Trainer) -> dict[str, Any]:
        """The run's logged windows on average (this invocation's): tokens/s or samples/s, and MFU
        (null unless the device's peak is known: perf.peak_tflops, or a GPU in harness/training/perf.py)."""
        seconds, updates = trainer.window.timed_seconds, trainer.window.timed_updates
        rate = self._throughput(seconds / updates) if updates else {}
        return {"mfu": None, **{key.split("/", 1)[1]: value for key, value in rate.items()}}
