"""The training loop: one optimizer update per `train_step`, everything else hangs off `fit`.

Host syncs are deliberate: metrics and the guard's verdicts stay on the device and are read at
logging steps (and before evals and checkpoints). With the default fused AdamW a bad update is
skipped on the device too; optimizers without a `found_inf` path cost one read per update (guard.py).
"""
from __future__ import annotations

import logging
import math
import signal
import threading
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn
from torch.utils.data import Dataset

from harness.attribution import attribute
from harness.checkpoint import (latest_valid_checkpoint, rng_state, save_best_checkpoint, save_step_checkpoint,
                                set_rng_state, step_checkpoints)
from harness.clipping import clip_gradients, global_grad_norm
from harness.data import BatchRecipe, DataMeta, LoaderSettings
from harness.data.loader import EvalBatches, TrainBatches, fetch
from harness.data.prior import majority_share, prior_loss
from harness.data.sampler import BatchStream, eval_indices
from harness.data.targets import target_shares
from harness.diagnosis.live import LiveDiagnosis, diagnose_settings
from harness.distributed import DistInfo, all_gather_objects, all_reduce_mean, all_reduce_min, any_rank, gradient_sync
from harness.early_stop import EarlyStopping
from harness.faults import FaultInjector
from harness.flops import flops_per_update, measure_flops, mfu, peak_flops
from harness.guard import Guard, Verdict, skips_on_device
from harness.log_window import LogWindow
from harness.loss import compute_loss, counted_targets
from harness.models.output import OutputPicker
from harness.models.probe import OUTPUT_ROWS, behaves_differently_in_eval, has_batch_norm, output_directions
from harness.monitor import Monitor
from harness.precision import Precision
from harness.rollback_point import RollbackPoint
from harness.tracking import Tracker, finite_or_none
from harness.metric_names import (GRAD_CLIP_RATE, GRAD_NORM_MAX, GRAD_NORM_POSTCLIP, GRAD_NORM_PRECLIP,
                                  GRAD_TENSORS_WITHOUT, PERF_MFU, PERF_SAMPLES, PERF_STEP_MS, PERF_TOKENS, TRAIN_EMPTY,
                                  TRAIN_EPOCH, TRAIN_LOSS, TRAIN_LOSS_FIRST, TRAIN_LOSS_MAX, TRAIN_LOSS_SCALE, TRAIN_LR,
                                  TRAIN_OVERFLOWS, TRAIN_SKIPPED, VAL_ACCURACY, VAL_LOSS, VAL_LOSS_ON_TRAIN)

log = logging.getLogger("harness")

ATTRIBUTED_PER_READ = 4  # skipped updates whose samples are rescored per read of the verdicts (a burst costs 4 passes)
EMPTY_EVENTS = 4  # empty updates reported as events; the rest are only counted (a padded corpus may have many)


@dataclass
class TrainState:
    """Counters that must survive a resume."""

    step: int = 0  # optimizer updates done
    best_val_loss: float = math.inf
    best_val_accuracy: float | None = None
    last_val_loss: float | None = None
    last_train_loss: float | None = None
    skipped_steps: int = 0  # updates skipped by the guard (NaN/Inf or loss spike)
    overflow_steps: int = 0  # fp16 updates skipped by the loss scaler
    empty_steps: int = 0  # updates skipped because every target was the ignore index
    rollbacks: int = 0
    lr_scale: float = 1.0  # product of the rollbacks' LR factors
    events: list[dict[str, Any]] = field(default_factory=list)


class StopRequest:
    """Set by SIGTERM/SIGUSR1 (preemption): save at the next step boundary and exit cleanly."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGUSR1):
                signal.signal(sig, self._handle)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signal_name = signal.Signals(signum).name


class Trainer:
    def __init__(
        self,
        cfg: DictConfig,
        *,
        model: nn.Module,
        raw_model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        precision: Precision,
        train_set: Dataset,
        val_set: Dataset,
        meta: DataMeta,
        recipe: BatchRecipe,
        loader: LoaderSettings,
        pick_output: OutputPicker,
        device: torch.device,
        dist: DistInfo,
        run_dir: Path,
        tracker: Tracker | None,
        reporter: Any = None,
        facts: dict[str, Any] | None = None,
    ) -> None:
        self.cfg, self.model, self.raw_model = cfg, model, raw_model
        self.optimizer, self.scheduler, self.precision = optimizer, scheduler, precision
        self.scaler = precision.scaler
        self.train_set, self.val_set, self.meta, self.recipe = train_set, val_set, meta, recipe
        self.pick_output = pick_output  # the logits out of a tensor, tuple, dict or ModelOutput
        self.device, self.dist, self.run_dir = device, dist, run_dir
        self.tracker, self.reporter = tracker, reporter
        self.facts = facts or {}  # measured at build time for the diagnosis (assembly.py)
        self.params = [p for p in raw_model.parameters() if p.requires_grad]
        self.clip = float(cfg.clip) if cfg.clip else 0.0
        self.loss_fn = partial(compute_loss, task=meta.task, label_smoothing=float(cfg.loss.label_smoothing),
                               z_loss=float(cfg.loss.z_loss), ignore_index=meta.ignore_index)
        self.eval_loss_fn = partial(compute_loss, task=meta.task, ignore_index=meta.ignore_index)
        self.micro_batch = cfg.batch_size // (cfg.accum * dist.world_size)
        # Batch norm cannot normalise a micro-batch of one sample: such models skip an epoch tail
        # too small to give every micro-batch two.
        min_batch = dist.world_size * (2 * cfg.accum if has_batch_norm(raw_model) else 1)
        stream = BatchStream(len(train_set), cfg.batch_size, cfg.seed, dist.world_size, cfg.data.get("shuffle", True),
                             min_batch)
        self.batches = TrainBatches(train_set, recipe, loader, stream, dist.rank, dist.world_size, cfg.accum, cfg.seed)
        count = cfg.trainer.eval_batches * self.micro_batch * dist.world_size
        eval_sample = eval_indices(len(val_set), count)
        eval_share = eval_sample.tensor_split(dist.world_size)[dist.rank]
        # The prior of the very samples every eval scores: a model blind to its inputs cannot beat
        # its loss, nor (by more than sampling noise) the accuracy of always naming the largest class.
        self.eval_prior = {"val_prior_loss": prior_loss(val_set, meta, eval_sample),
                           "val_majority_share": majority_share(val_set, meta, eval_sample),
                           "eval_samples": len(eval_sample)}
        self.eval_batches = EvalBatches(val_set, recipe, loader, eval_share, self.micro_batch, cfg.seed)
        # Training samples evaluated in eval mode, for models whose eval mode differs (batch norm,
        # dropout): it tells a train/eval-mode gap apart from overfitting.
        self.train_eval_batches = None
        if behaves_differently_in_eval(raw_model):
            train_share = eval_indices(len(train_set), count).tensor_split(dist.world_size)[dist.rank]
            self.train_eval_batches = EvalBatches(train_set, recipe, loader, train_share, self.micro_batch, cfg.seed,
                                                  "train")
        self.state = TrainState()
        self.stop_request = StopRequest()
        self.guard = Guard(cfg.guard, dist, device)
        self.skip_on_device = skips_on_device(optimizer)
        self.rollback_point = RollbackPoint(self.guard.cfg.snapshot_every if self.guard.cfg.rollback_after else None)
        self._unread_batches: dict[int, list] = {}  # step -> its micro-batches, until the verdicts are read
        self.faults = FaultInjector(cfg.fault, dist.rank)
        self.monitor = Monitor(cfg.monitor, raw_model, cfg.trainer.max_steps)
        self.early_stop = EarlyStopping(cfg.early_stop)
        self.live_diagnosis = None  # set when training starts (see fit): the rules need the run's files
        self._rollback_due = False
        # plain attributes: OmegaConf lookups cost microseconds each, too much for every step
        self.accum, self.mean_reduction = cfg.accum, cfg.accum_reduction == "mean"
        self.clip_mode, self.log_every, self.max_steps = cfg.clip_mode, cfg.trainer.log_every, cfg.trainer.max_steps
        self.window = LogWindow(device)
        # MFU needs the device's peak; the FLOPs of one update on this rank come in closed form
        # (the built-in GPT) or are counted on the first update (any other model)
        self.peak = peak_flops(device, cfg.precision.name, OmegaConf.select(cfg, "perf.peak_tflops"))
        closed_form = flops_per_update(raw_model, cfg.batch_size)
        self.flops = closed_form / dist.world_size if closed_form is not None else None
        self._post_norm_measured = self.window.last_grad_norm
        self._lr_used = 0.0
        self._without_grad = 0  # trainable tensors with no gradient on the last logging step
        self.output_directions: dict[str, Any] | None = None  # of the logits, at the last eval (classification)
        # 0 and 1 on the device, picked by a host-side fact without copying it over each step
        self._has_targets = (torch.zeros((), device=device), torch.ones((), device=device))

    # ------------------------------------------------------------------ the step
    def train_step(self) -> None:
        """One optimizer update over `accum` micro-batches (order matters; see README)."""
        step = self.state.step + 1
        log_step = self._is_log_step(step)
        monitoring = log_step and self.monitor.due(step, self.log_every)
        self.faults.arm(step)
        micro_batches = self.batches.next_update()
        fetched = [self.batches.fetch(mb) for mb in micro_batches]
        shares = target_shares([y for _, y in fetched], self.meta.ignore_index)
        if shares is None and self.dist.world_size == 1:
            self._skip_empty(step)
            return
        if self.guard.enabled:  # which samples a skipped update held (host-side references, no copy)
            self._unread_batches[step] = micro_batches
        loss = self._forward_backward(fetched, shares or [0.0] * len(fetched), monitoring)
        self.faults.on_grads(self.params)
        if log_step:  # trainable tensors the loss never reached (a host-side count, no read)
            self._without_grad = sum(p.grad is None for p in self.params)

        self.scaler.unscale_(self.optimizer)  # fp16: clipping and norms must see true gradients
        grad_norm = global_grad_norm(self.params)  # pre-clip, on the device
        verdict, judged_loss = self.guard.judge(loss, grad_norm, self.precision.scaling)  # on the device
        if self.guard.enabled and self.dist.world_size > 1:  # empty on every rank: skipped like a bad update
            counted = self._has_targets[shares is not None]
            verdict = torch.where(all_reduce_mean(counted, self.dist) > 0, verdict, Verdict.EMPTY)
        ok = verdict == Verdict.OK
        monitoring = monitoring and bool(ok)  # a logging step: reading is allowed
        if monitoring:
            self.monitor.after_backward()
        if self.clip:
            clip_gradients(self.params, self.clip_mode, self.clip, grad_norm)
            if log_step and self.clip_mode != "norm":
                self._post_norm_measured = global_grad_norm(self.params)
        self._lr_used = self.optimizer.param_groups[0]["lr"]
        self._step_unless_bad(ok)  # a bad update moves neither parameters nor moments
        self._update_loss_scale(ok)
        self.scheduler.step()  # counts optimizer updates, skipped ones included
        self.optimizer.zero_grad(set_to_none=True)

        if monitoring:
            self.monitor.after_step()
        clipped = grad_norm > self.clip if self.clip and self.clip_mode == "norm" else None
        self.window.add(step, loss, grad_norm, verdict, judged_loss, clipped)

    def _forward_backward(self, fetched: list[tuple[torch.Tensor, torch.Tensor]], shares: list[float],
                          monitoring: bool) -> torch.Tensor:
        """Accumulate the gradients of one batch's mean loss; returns that loss (on the device)."""
        loss = None
        for k, ((x, y), share) in enumerate(zip(fetched, shares)):
            last = k == len(fetched) - 1
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            # Under DDP, gradients are all-reduced only after the last micro-batch's backward.
            with gradient_sync(self.model, sync=last), self.monitor.capture_forward(monitoring and last):
                with self.precision.autocast():
                    micro_loss = self.faults.on_loss(self.loss_fn(self.pick_output(self.model(x)), y))
                # Weighted by its share of the counted targets, the micro-batches' gradients sum to
                # the gradient of the whole batch's mean loss (accum_reduction=sum skips this: a bug demo).
                self.scaler.scale(micro_loss * (share if self.mean_reduction else 1.0)).backward()
            part = micro_loss.detach() * share
            loss = part if loss is None else loss + part
        return loss

    def _skip_empty(self, step: int) -> None:
        """An update whose every target is the ignore index has nothing to learn from: no forward,
        no step; the schedule still advances, as for any skipped update, and the log counts it."""
        self.scheduler.step()
        zero = torch.zeros((), device=self.device)
        self.window.add(step, zero, zero, torch.tensor(Verdict.EMPTY, device=self.device), zero, None)

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

    def advance(self) -> bool:
        """One update and, on a logging step, its log: what `fit` does per step minus evals,
        checkpoints and rollbacks, for benchmarks and tests that drive the trainer themselves.
        True when the step logged."""
        self.train_step()
        self.state.step += 1
        logged = self._is_log_step(self.state.step)
        if logged:
            self.hear_guard()
            self._log_train()
        return logged

    def _is_log_step(self, step: int) -> bool:
        return step % self.log_every == 0 or step == self.max_steps

    def hear_guard(self) -> None:
        """Read the verdicts not yet read (one host read): count the bad updates, log them as
        events with their steps, and arm a rollback when they repeat."""
        bad, good_losses = self.window.read_verdicts()
        self.guard.remember(good_losses)
        attributed = 0
        for step, verdict in bad:
            if verdict == Verdict.OVERFLOW:  # the loss scale was too high: expected, the scaler backs off
                self.state.overflow_steps += 1
                continue
            if verdict == Verdict.EMPTY:
                self._note_empty(step)
                continue
            self.state.skipped_steps += 1
            kind, what = ("nonfinite", "non-finite loss or gradients") if verdict == Verdict.NONFINITE else (
                "spike", "loss spike")
            details: dict[str, Any] = {}
            if step in self._unread_batches and attributed < ATTRIBUTED_PER_READ:
                attributed += 1
                found = self._attribute(self._unread_batches[step])
                details = {"samples": found.samples, "data_cause": any_rank(found.data_cause, self.dist, self.device)}
                what += f"; {found.describe()}"
            self._event(f"skip_{kind}", f"step {step}: {what}, update skipped", step, **details)
            self._rollback_due = self.guard.record_bad(step, details.get("data_cause", False)) or self._rollback_due
        self._unread_batches.clear()

    def _note_empty(self, step: int) -> None:
        """Count an empty update; the first EMPTY_EVENTS are events too."""
        self.state.empty_steps += 1
        if self.state.empty_steps <= EMPTY_EVENTS:
            self._event("skip_empty", f"step {step}: every target of the update is loss.ignore_index "
                                      f"({self.meta.ignore_index}); nothing to learn from, update skipped as empty",
                        step)

    def _attribute(self, micro_batches: list) -> Any:
        """Score the samples of a skipped update one by one (this rank's share): which stood out."""
        indices = torch.cat([mb.indices for mb in micro_batches])
        x, y = fetch(self.train_set, self.recipe, indices)
        return attribute(self.raw_model, self.pick_output, x.to(self.device), y.to(self.device), indices.tolist(),
                         self.meta.task, self.meta.ignore_index)

    def _update_loss_scale(self, ok: torch.Tensor) -> None:
        """fp16: back off after an overflow, grow after a quiet stretch. Overflows the guard did
        not already catch (guard off) are counted on the device by watching the scale shrink."""
        if not self.precision.scaling:
            return
        before = self.scaler._get_scale_async().clone()
        self.scaler.update()
        self.window.sums[2] += (self.scaler._get_scale_async() < before) & ok

    def _post_clip_norm(self, pre_norm: torch.Tensor) -> torch.Tensor:
        """The norm the optimizer saw; computed at log time only. For clip_mode=norm it is the
        closed form of what clip_grads_with_norm_ did; other modes clip per element or per
        tensor, so their post-clip norm is only known on the logging step itself."""
        if not self.clip:
            return pre_norm
        if self.clip_mode == "norm":
            return pre_norm * torch.clamp(self.clip / (pre_norm + 1e-6), max=1.0)
        return self._post_norm_measured

    # ------------------------------------------------------------------ the loop
    def fit(self) -> str:
        """Train until max_steps (or a stop); returns the run's status."""
        self.stop_request.install()
        self._start_live_diagnosis()
        t = self.cfg.trainer
        start_step = self.state.step
        no_checkpoint = any_rank(not step_checkpoints(self.run_dir), self.dist, self.device)  # rank 0 decides
        if self.guard.cfg.rollback_after and no_checkpoint:
            self.save_checkpoint()  # something to roll back to before the first periodic checkpoint
        if self.rollback_point.due(self.state.step, bool(self.guard.bad_steps)):
            self.rollback_point.take(self.state_dict(), self.state.step)
        self.window.restart_clock()
        while self.state.step < t.max_steps:
            if self.peak and self.flops is None:
                self.flops = measure_flops(self.train_step)
            else:
                self.train_step()
            self.state.step += 1
            step, last = self.state.step, self.state.step == t.max_steps
            log_step, eval_step = self._is_log_step(step), step % t.eval_every == 0 or last
            preempted = self._preempted(step)
            stop = preempted or (t.stop_after and step - start_step >= t.stop_after)
            if log_step or eval_step or step % t.ckpt_every == 0 or stop:
                self.hear_guard()  # the same steps on every rank: ranks agree on rollbacks
                if not self._rollback_due and self.rollback_point.due(step, bool(self.guard.bad_steps)):
                    self.rollback_point.take(self.state_dict(), step)
            if self._rollback_due:
                if status := self._roll_back():
                    return status
                continue
            if log_step and not self._log_train():
                self.save_checkpoint()
                return "diverged"
            if eval_step:
                status = self._evaluate_and_track() or ("pruned" if self._should_prune() else None)
                if status:
                    self.save_checkpoint()
                    return status
            if step % t.ckpt_every == 0 or last or stop:
                self.save_checkpoint()
            if preempted:
                self._event("preempted", f"{self.stop_request.signal_name or 'signal'} at step {step}: "
                                         f"checkpoint saved, stopping")
                return "preempted"
            if stop:
                return "stopped"
        return "completed"

    def _start_live_diagnosis(self) -> None:
        settings = diagnose_settings(self.cfg.diagnose)
        if settings.live:  # every rank: rank 0 judges, all agree on a stop
            reported = {e["finding"] for e in self.state.events if e["kind"] == "diagnosis" and "finding" in e}
            self.live_diagnosis = LiveDiagnosis(self.run_dir, settings, reported)

    def _preempted(self, step: int) -> bool:
        """A stop signal seen by any rank. Ranks can receive it a step apart, so under DDP
        they agree on it at logging steps only (one tiny all-reduce there, none elsewhere)."""
        if not self.dist.enabled:
            return self.stop_request.signal_name is not None
        return self._is_log_step(step) and any_rank(self.stop_request.signal_name is not None, self.dist, self.device)

    def _roll_back(self) -> str | None:
        """Repeated bad updates the model is blamed for: reload the newest good state (the guard's
        snapshot or the last checkpoint), lower the LR, keep the data moving forward."""
        self._rollback_due = False
        g = self.guard.cfg
        data = any(e.get("data_cause") for e in self.state.events if e["step"] in self.guard.bad_steps)
        if self.state.rollbacks >= g.max_rollbacks:
            advice = ("the skipped updates' samples stood out from their batches: inspect, fix or drop them (the "
                      "skip events name them)" if data else "lower optim.lr, lengthen warmup or enable clipping")
            self._event("diverged", f"step {self.state.step}: bad updates kept coming after {self.state.rollbacks} "
                                    f"rollback(s); {advice}")
            return "diverged"
        found = latest_valid_checkpoint(self.run_dir)
        if self.rollback_point.newer_than(found[1]["step"] if found else None):
            source, ckpt = f"the guard's snapshot of step {self.rollback_point.step}", self.rollback_point.state
        elif found is not None:
            source, ckpt = found[0].name, found[1]
        else:
            self._event("diverged", f"step {self.state.step}: repeated bad updates and no checkpoint to roll back to")
            return "diverged"
        before, data_position, fired = self.state, self.batches.state_dict(), self.faults.state_dict()
        self.load_state_dict(ckpt)
        self.batches.load_state_dict(data_position)  # skip past the batches that went bad, do not replay them
        self.faults.load_state_dict(fired)
        self.state.skipped_steps, self.state.overflow_steps = before.skipped_steps, before.overflow_steps
        self.state.empty_steps = before.empty_steps
        self.state.events, self.state.rollbacks = before.events, before.rollbacks + 1
        self.state.lr_scale = before.lr_scale * g.rollback_lr_factor
        self._apply_lr_scale()
        self.guard.bad_steps = []
        self._event("rollback", f"step {before.step}: {g.rollback_after} bad updates within {g.rollback_window} steps; "
                                f"rolled back to step {self.state.step} ({source}), LR x{self.state.lr_scale:g}",
                    data_cause=data)
        return None

    def _apply_lr_scale(self) -> None:
        """Base LRs are the optimizer's initial LRs times the rollbacks' factor; the schedule multiplies on top."""
        self.scheduler.base_lrs = [g["initial_lr"] * self.state.lr_scale for g in self.optimizer.param_groups]
        for group, base, factor in zip(self.optimizer.param_groups, self.scheduler.base_lrs, self.scheduler.lr_lambdas):
            group["lr"] = base * factor(self.scheduler.last_epoch)

    def _log_train(self) -> bool:
        """Read the window off the device (the log step's sync); False when the loss went non-finite.
        The guard's verdicts must have been read first (`hear_guard`)."""
        pre = self.window.last_grad_norm
        post = self._post_clip_norm(pre)
        monitored, histograms = self.monitor.pop()
        if self.window.first_loss is not None:  # read with the first window: where the blow-up test starts
            monitored[TRAIN_LOSS_FIRST], self.window.first_loss = self.window.first_loss, None
        window, applied, seconds = self.window.close()
        values = torch.cat([window, torch.stack([pre, post, *monitored.values()])])
        values = all_reduce_mean(values, self.dist).tolist()
        loss_sum, clipped, overflows, loss_max, norm_max, pre_norm, post_norm = values[:7]
        self.state.overflow_steps += round(overflows)
        if self.clip and self.clip_mode != "norm":
            clipped = float(post_norm < pre_norm) * applied  # sampled on the logging step
        train_loss = loss_sum / applied if applied else None  # None: every update of the window was skipped
        if train_loss is not None:
            self.state.last_train_loss = train_loss
        scalars = {
            TRAIN_LR: self._lr_used,
            GRAD_NORM_PRECLIP: pre_norm,
            GRAD_NORM_POSTCLIP: post_norm,
            GRAD_NORM_MAX: norm_max,
            GRAD_CLIP_RATE: clipped / max(applied, 1),
            TRAIN_SKIPPED: float(self.state.skipped_steps),
            PERF_STEP_MS: 1000 * seconds,
            TRAIN_EPOCH: self.batches.stream.epochs_done(),
            GRAD_TENSORS_WITHOUT: float(self._without_grad),
        }
        if train_loss is not None:
            scalars = {TRAIN_LOSS: train_loss, TRAIN_LOSS_MAX: loss_max, **scalars}
        scalars.update(self._throughput(seconds))
        if self.state.empty_steps:
            scalars[TRAIN_EMPTY] = float(self.state.empty_steps)
        if self.precision.scaling:
            scalars[TRAIN_LOSS_SCALE] = float(self.scaler.get_scale())
            scalars[TRAIN_OVERFLOWS] = float(self.state.overflow_steps)
        scalars.update(zip(monitored, values[7:]))
        if self.tracker:
            self.tracker.log(self.state.step, scalars)
            self.tracker.histograms(self.state.step, histograms)
        if train_loss is not None and not math.isfinite(train_loss):
            self._event("diverged", f"step {self.state.step}: training loss is {train_loss}; stopping")
            return False
        return True

    def _throughput(self, seconds_per_update: float) -> dict[str, float]:
        """tokens/s (language models) or samples/s, and MFU when the device's peak is known."""
        samples_per_s = self.cfg.batch_size / max(seconds_per_update, 1e-9)
        rate = {PERF_TOKENS: samples_per_s * self.meta.block_size} if self.meta.task == "lm" else {
            PERF_SAMPLES: samples_per_s}
        if self.peak and self.flops:
            rate[PERF_MFU] = mfu(self.flops, seconds_per_update, self.peak)
        return rate

    def summary(self, status: str) -> dict[str, Any]:
        """What summary.json says of the run so far (run.py adds wall time and the objective)."""
        s = self.state
        return {
            "status": status,
            "reason": s.events[-1]["message"] if status not in ("completed", "running") and s.events else None,
            "steps": s.step,
            "max_steps": int(self.max_steps),
            "best_val_loss": finite_or_none(s.best_val_loss),
            "final_val_loss": finite_or_none(s.last_val_loss),
            "final_train_loss": finite_or_none(s.last_train_loss),
            "best_val_accuracy": s.best_val_accuracy,
            "skipped_steps": s.skipped_steps,
            "overflow_steps": self.total_overflow_steps(),
            "empty_steps": s.empty_steps,
            "output_directions": self.output_directions,
            "events": s.events,
            "task": self.meta.task,
            "chance_loss": self.meta.chance_loss,
            "prior_loss": self.meta.prior_loss,
            **self.eval_prior,
            "optimum_loss": self.meta.optimum_loss,
            "modules": sorted({type(m).__name__ for m in self.raw_model.modules()}),  # what the rules may ask of
            **self.facts,
            "mfu": None,  # known when the device's peak is (perf.peak_tflops, or a GPU in harness/flops.py)
            **self.mean_throughput(),  # tokens_per_s or samples_per_s, and mfu
        }

    def mean_throughput(self) -> dict[str, float | None]:
        """The run's logged windows on average (this invocation's): tokens/s or samples/s, and MFU."""
        seconds, updates = self.window.timed_seconds, self.window.timed_updates
        if not updates:
            return {}
        rate = self._throughput(seconds / updates)
        return {key.split("/", 1)[1]: value for key, value in rate.items()}

    # ------------------------------------------------------------------ eval
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Mean loss (and accuracy for classification) over the same fixed validation samples every
        time; for models with batch norm or dropout, also over fixed training samples in eval mode."""
        self.model.eval()
        # only rank 0 writes the summary the measure goes into
        keep_logits = self.meta.task == "classification" and self.dist.is_main
        loss, accuracy = self._eval_pass(self.eval_batches, keep_logits=keep_logits)
        result = {VAL_LOSS: loss}
        if self.meta.task == "classification":
            result[VAL_ACCURACY] = accuracy
        if self.train_eval_batches is not None:
            result[VAL_LOSS_ON_TRAIN], _ = self._eval_pass(self.train_eval_batches)
        self.model.train()
        return result

    def _eval_pass(self, batches: EvalBatches, keep_logits: bool = False) -> tuple[float, float]:
        """(mean loss, accuracy) of the model as it is, over one fixed set of micro-batches; with
        `keep_logits`, how many directions the first OUTPUT_ROWS samples' logits span is kept for
        the summary (a capacity limit shows there)."""
        totals = torch.zeros(3, device=self.device)  # loss * n, correct, n
        kept: list[torch.Tensor] = []
        for x, y in batches:
            x, y = x.to(self.device), y.to(self.device)
            with self.precision.autocast():
                out = self.pick_output(self.model(x))
            if keep_logits and sum(map(len, kept)) < OUTPUT_ROWS:
                kept.append(out.float())
            counted = counted_targets(y, self.meta.ignore_index)
            n = counted.sum().float()
            correct = ((out.argmax(-1) == y) & counted).sum() if self.meta.task == "classification" else n * 0
            totals += torch.stack([self.eval_loss_fn(out, y) * n, correct, n])
        loss_n, correct, n = all_reduce_mean(totals, self.dist).tolist()
        if kept:
            self.output_directions = output_directions(torch.cat(kept)[:OUTPUT_ROWS])
        return (loss_n / n, correct / n) if n else (math.nan, math.nan)  # every target ignored: no measure

    def _evaluate_and_track(self) -> str | None:
        """Evaluate, log, keep best.pt; returns a stop status from early stopping, if any."""
        result = self.evaluate()
        val = result[VAL_LOSS]
        self.state.last_val_loss = val
        if self.tracker:
            self.tracker.log(self.state.step, result, kind="eval")
        if VAL_ACCURACY in result:
            self.state.best_val_accuracy = max(result[VAL_ACCURACY], self.state.best_val_accuracy or 0.0)
        if math.isfinite(val) and val < self.state.best_val_loss:
            self.state.best_val_loss = val
            state = self.state_dict()
            if self.dist.is_main:
                save_best_checkpoint(state, self.run_dir)
        if status := self._diagnose_so_far():
            return status
        stop = self.early_stop.update(val)
        if stop == "diverged":
            self._event("diverged", f"step {self.state.step}: validation loss {val:.4g} is non-finite or above "
                                    f"early_stop.divergence_threshold; stopping")
        elif stop == "early_stopped":
            self._event("early_stop", f"step {self.state.step}: no val improvement > {self.early_stop.min_delta} "
                                      f"for {self.early_stop.patience} evals (best {self.early_stop.best:.4f})")
        return stop

    def _diagnose_so_far(self) -> str | None:
        """The diagnosis rules on the metrics so far (rank 0 writes them): a new critical finding is
        printed once and logged as an event; under diagnose.abort_on it stops the run, as
        `diverged` for a diverging loss and `sick` for any other finding (all ranks agree)."""
        if self.live_diagnosis is None:
            return None
        stop = None
        if self.dist.is_main and self.tracker is not None:  # the metrics it writes are what the rules read
            for finding in self.live_diagnosis.new_findings(self.summary("running")):
                self._event("diagnosis", f"step {self.state.step}: {finding.summary_line()}", finding=finding.name)
                if self.live_diagnosis.abort_on and stop is None:
                    stop = "diverged" if finding.name == "diverging" else "sick"
        if self.live_diagnosis.abort_on and any_rank(stop is not None, self.dist, self.device):
            return stop or "sick"
        return None

    def _should_prune(self) -> bool:
        if self.reporter is None or self.state.last_val_loss is None:
            return False
        self.reporter.report(self.state.last_val_loss, self.state.step)
        flag = torch.tensor(0.0 if self.reporter.should_prune() else 1.0, device=self.device)
        if all_reduce_min(flag, self.dist).item() == 0.0:
            self._event("pruned", f"step {self.state.step}: the sweep's pruner stopped this trial")
            return True
        return False

    def _event(self, kind: str, message: str, step: int | None = None, **details: Any) -> None:
        step = self.state.step if step is None else step
        self.state.events.append({"step": step, "kind": kind, "message": message, **details})
        if self.tracker:
            self.tracker.text(f"events/{kind}", message, step)
        else:
            log.warning(message)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        self.hear_guard()  # skip events belong in the saved state
        return {
            "step": self.state.step,
            "model": self.raw_model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": all_gather_objects(rng_state(), self.dist),  # one per rank
            "data": self.batches.state_dict(),
            "trainer": asdict(self.state),
            "guard": self.guard.state_dict(),
            "faults": self.faults.state_dict(),
            "early_stop": self.early_stop.state_dict(),
            "window": self.window.state_dict(),
            "monitor": self.monitor.state_dict(),
            "config": OmegaConf.to_container(self.cfg, resolve=True),
        }

    def load_state_dict(self, ckpt: dict[str, Any]) -> None:
        self.raw_model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.scaler.load_state_dict(ckpt["scaler"])
        self.batches.load_state_dict(ckpt["data"])
        self.state = TrainState(**ckpt["trainer"])
        self.guard.load_state_dict(ckpt["guard"])
        self.faults.load_state_dict(ckpt["faults"])
        self.early_stop.load_state_dict(ckpt["early_stop"])
        self.window.load_state_dict(ckpt["window"])
        self.monitor.load_state_dict(ckpt.get("monitor", {}))  # absent in older checkpoints
        # Same world size: each rank continues its own streams. Another world size still resumes
        # (same data order; weights and optimizer are replicated) but dropout draws differ.
        per_rank = ckpt["rng"]
        set_rng_state(per_rank[self.dist.rank] if len(per_rank) == self.dist.world_size else per_rank[0])

    def save_checkpoint(self) -> None:
        """All ranks build the state (it gathers their RNG states); rank 0 writes it."""
        state = self.state_dict()
        if self.dist.is_main:
            save_step_checkpoint(state, self.run_dir, self.state.step, self.cfg.trainer.keep_last)

    def close(self) -> None:
        """Stop the data workers and flush the logs; the trainer is not used afterwards."""
        self.batches.close()
        self.eval_batches.close()
        if self.train_eval_batches is not None:
            self.train_eval_batches.close()
        if self.tracker:
            self.tracker.close()

    def total_overflow_steps(self) -> int:
        return self.state.overflow_steps + round(self.window.sums[2].item())
