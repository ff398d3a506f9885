"""Assemble a Trainer from the validated config: every component from its config group, wired
together, resumed when asked. Training (run.py), the doctor and the LR finder all start here,
so imports flow one way: entry -> modes -> assembly -> components."""
from __future__ import annotations

import copy
import logging
import os
import random
import socket
from functools import partial
from dataclasses import dataclass, replace
from pathlib import Path
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from torch import nn
from torch.utils.data import Dataset

from harness.training.attribution import attribute
from harness.loop.callbacks.checkpointing import Checkpointing
from harness.loop.callbacks.baseline import Baseline
from harness.loop.callbacks.evaluation import BestCheckpoint, EarlyStop, Evaluation
from harness.loop.callbacks.guard_watch import GuardWatch
from harness.loop.callbacks.live_diagnosis import LiveDiagnosisCallback
from harness.loop.callbacks.metrics import MetricsLog
from harness.config.run_config import SUMMARY_OBJECTIVES, RunConfig
from harness.training.metrics import build_eval_metrics
from harness.training.metrics.measure import EvalMetrics
from harness.training.metrics.monitored import resolve_selection
from harness.core.config_keys import PER_INVOCATION
from harness.loop.callbacks.sweep import SweepReport
from harness.loop.callbacks.user import build_user_callbacks
from harness.state.checkpoint import FileCheckpoints
from harness.data import BatchRecipe, DataMeta, LoaderSettings, build_splits
from harness.data.checks import spread_indices
from harness.data.facts import input_stats, split_facts
from harness.data.standardize import standardised
from harness.data.loader import EvalBatches, TrainBatches, fetch
from harness.data.prior import majority_share, prior_loss
from harness.data.sampler import BatchStream, eval_indices
from harness.core.distributed import DistInfo
from harness.training.early_stop import EarlyStopping
from harness.core.errors import ConfigError, one_line
from harness.loop.evaluation import Evaluator
from harness.training.faults import FaultInjector
from harness.training.perf import flops_per_update, peak_flops
from harness.training.guard import Guard
from harness.loop.hooks import Callbacks
from harness.loop.cadence import Cadence
from harness.training.loss import compute_loss
from harness.training.objective import PART_SHARE, Objective, OpenObjective, TargetLoss, note_unused_fields
from harness.data.batch import batch_size, to_device
from harness.models.calling import ModelCall
from harness.models import build_model
from harness.models.activation_swap import swap_activations
from harness.models.activation_trace import ActivationTrace, trace_activations
from harness.models.code_checks import announced, code_facts
from harness.models.forward_facts import forward_facts, untouched, untrained_losses
from harness.models.output_activation import describe_output, replace_output_activation
from harness.models.init import apply_init
from harness.models.output import OutputPicker
from harness.models.probe import (behaves_differently_in_eval, check_batch_norm, effective_rank, embedding_rows,
                                  has_batch_norm, input_wide, parameter_counts, probe_model)
from harness.training.monitor import Monitor
from harness.training.optim import build_optimizer
from harness.training.parallel import class_name, is_sharded, optimizer_config, parallelize
from harness.training.precision import Precision, ScalerState, build_precision
from harness.state.rundir import remove_stale_temp_files
from harness.training.schedule import LiveLR, build_scheduler, check_schedule_continues
from harness.state.sharded_checkpoint import ModelState, OptimizerState, ShardedCheckpoints
from harness.loop.step import ClipSettings, TrainStep
from harness.logger.base import RunInfo
from harness.logger.tracking import Tracker
from harness.loop.trainer import Trainer
from harness.loop.callbacks.sweep_trial import TrialReporter, watch_sweeper

log = logging.getLogger("harness")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def check_batch_fits(batch_size: int, train_samples: int, data_name: str) -> None:
    """Refused, not clamped: a batch larger than the training set would silently be the whole set
    (every update the same full-batch gradient), which is not the run the user asked for."""
    if batch_size > train_samples:
        raise ConfigError("batch_size", batch_size, f"at most the {train_samples} training samples of data={data_name} "
                                                    f"(batch_size={train_samples} is full-batch training)")


def check_resume_point(config: RunConfig, saved: dict[str, Any] | None, step: int, checkpoint: Path) -> None:
    """A resume must have steps left to train, and must not jump the LR (the schedule that
    trained to `step` and the one that continues agree there)."""
    max_steps = config.trainer.max_steps
    if step >= max_steps:
        raise ConfigError("resume", str(config.job.resume), f"a checkpoint before trainer.max_steps={max_steps}: "
                                                            f"{checkpoint.name} is at step {step}, so nothing would "
                                                            f"train (raise trainer.max_steps to train it further)")
    if saved is not None:
        check_schedule_continues(OmegaConf.create(saved), config.schedule, max_steps, step)


def same_run(recorded: dict[str, Any], saved: dict[str, Any] | None) -> bool:
    """Whether `recorded` (this run's resolved config) is the configuration that wrote a checkpoint
    (what one invocation alone sets aside): a resume of the same run, not a new one started from
    its checkpoint."""
    if saved is None:
        return False
    return _run_defining(recorded) == _run_defining(saved)


def _run_defining(config: dict[str, Any]) -> dict[str, Any]:
    """The config without the keys one invocation sets (config_keys.PER_INVOCATION, dotted)."""
    kept = copy.deepcopy(config)
    for dotted in PER_INVOCATION:
        *parents, leaf = dotted.split(".")
        node = kept
        for parent in parents:
            node = node.get(parent) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return kept


TRACED_SAMPLES = 2
PARTIAL_BATCH = 3  # samples of the smaller batch the model is also probed on
INITIAL_BATCHES = range(1, 9)  # seeds of the micro-batches the untrained model's loss spread is read on


@dataclass(frozen=True)
class Assembly:
    """What the builder made: the Trainer, and the parts the loop holds privately or not at all,
    which the doctor, the LR finder, mode=eval, benchmarks and tests read."""

    trainer: Trainer
    config: RunConfig
    raw_model: nn.Module  # unwrapped: no DDP, FSDP or torch.compile around it
    meta: DataMeta
    device: torch.device
    dist: DistInfo
    train_set: Dataset
    val_set: Dataset
    test_set: Dataset | None  # built for mode=eval to score; the loop never reads it
    recipe: BatchRecipe
    micro_batch: int  # samples per forward on one rank
    train_step: TrainStep  # one update; its loss_fn is the training loss (label smoothing, z-loss)
    evaluator: Evaluator  # its loss_fn: without label smoothing or z-loss
    model_state: ModelState  # loads a checkpoint's weights, sharded or whole

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.train_step.optimizer

    @property
    def live_lr(self) -> LiveLR:
        """The one writer of the optimizer's LRs."""
        return self.train_step.live_lr

    @property
    def precision(self) -> Precision:
        return self.train_step.precision

    @property
    def pick_output(self) -> OutputPicker:
        return self.train_step.pick_output

    @property
    def objective(self) -> Objective:
        """What training minimises (with label smoothing and z-loss)."""
        return self.train_step.objective

    @property
    def clean_objective(self) -> Objective:
        """The loss evaluation measures: without label smoothing or z-loss."""
        return self.evaluator.open_objective or TargetLoss(self.evaluator.loss_fn, self.pick_output,
                                                           self.meta.ignore_index)

    def close(self) -> None:
        self.trainer.close()


def assemble(config: RunConfig, run_dir: Path, device: torch.device,
             resume_from: tuple[Path, dict[str, Any]] | None, dist: DistInfo = DistInfo(),
             console: bool = True) -> Assembly:
    """Every component from its config group, wired into a Trainer (resumed when asked). Training,
    the doctor and the LR finder all build here; `console=False` keeps the progress line quiet
    (benchmarks)."""
    run = config.run
    seed_everything(run.seed)
    data = config.data
    user_loss = config.user_loss
    splits = build_splits(data, config.loss.ignore_index, config.loss.function,
                          user_loss.path if user_loss is not None else None)
    train_set, val_set, meta = splits.train, splits.val, splits.meta
    check_batch_fits(run.batch_size, len(train_set), data.name)
    recipe, targets = standardised(data.recipe, train_set, inputs=data.loading.standardize,
                                   targets=data.loading.standardize_targets, task=meta.task,
                                   loss_function=meta.loss_function)
    if user_loss is not None:
        recipe = replace(recipe, whole=True)
    raw_model = build_model(config.model, meta)
    apply_init(raw_model, config.init)
    raw_model.to(device)
    pick_output = OutputPicker(run.model_output, targets.to(device) if targets is not None else None)
    micro_batch = run.batch_size // (run.accum * dist.world_size)
    check_batch_norm(raw_model, micro_batch, run.batch_size)
    x, y = fetch(train_set, recipe, spread_indices(len(train_set), micro_batch))
    open_objective = None  # the user's objective: built once, checked here, used by the step and the evals
    if user_loss is not None:
        open_objective = OpenObjective(user_loss, ModelCall(raw_model, data.recipe.input_key))
    model_call = open_objective.call if open_objective is not None else None
    if open_objective is None:
        probe_model(raw_model, pick_output, meta, x.to(device), y.to(device), config.model.path)
        if len(x) > PARTIAL_BATCH:  # an epoch's or an eval's last batch is smaller: the output must follow it
            probe_model(raw_model, pick_output, meta, x[:PARTIAL_BATCH].to(device), y[:PARTIAL_BATCH].to(device),
                        config.model.path)
        few = x[:TRACED_SAMPLES].to(device)  # which activations are hidden or make the output: two samples tell
    else:  # the whole first micro-batch: its structure is the user's
        few = to_device(x, device)
        untrained = open_objective.check(raw_model, few)
        if open_objective.counted is not None:
            first = spread_indices(len(train_set), micro_batch)
            fewer = fetch(train_set, recipe, first[:max(1, len(first) // PART_SHARE)])[0]
            open_objective.check_counted_parts(raw_model, to_device(fewer, device))
        if dist.is_main:
            note_unused_fields(few, model_call, user_loss)
    swapped = swap_activations(raw_model, run.activation_swap, few, model_call)

    def traced() -> ActivationTrace:
        """Which activations are hidden and which make the output, on the model as it is now."""
        return trace_activations(raw_model, few, None if model_call else pick_output.pick, model_call)

    output_replaced = []
    if run.output_activation is not None:
        output_replaced = replace_output_activation(raw_model, run.output_activation, traced())
    if dist.is_main:
        for key, changed in (("activation_swap", swapped), ("output_activation", output_replaced)):
            if changed:
                log.info("%s=%s replaced %d module(s): %s", key, getattr(run, key), len(changed), ", ".join(changed))
    facts = None
    trace = traced() if dist.is_main and run.mode == "train" else None
    if trace is not None and user_loss is None:  # what summary.json tells the diagnosis
        facts = {"parameters": parameter_counts(raw_model), "hidden_activations": trace.hidden,
                 **split_facts(train_set, val_set, recipe, meta.task, targets),
                 "target_scale": targets.summary() if targets is not None else None,
                 "input_stats": input_stats(train_set, recipe), "activation_swap": swapped,
                 "output_activation": describe_output(raw_model, trace), "output_replaced": output_replaced,
                 "test_samples": len(splits.test) if splits.test is not None else None}
    elif trace is not None:  # the data and the output are the objective's to read
        rows = embedding_rows(untrained)
        facts = {"parameters": parameter_counts(raw_model), "hidden_activations": trace.hidden,
                 "input_stats": input_stats(train_set, recipe, model_call.arguments),
                 "activation_swap": swapped, "output_activation": describe_output(raw_model, trace),
                 "output_replaced": [], "test_samples": len(splits.test) if splits.test is not None else None,
                 "initial_effective_rank": effective_rank(rows) if rows is not None else None,
                 "rank_rows_input_wide": rows is not None and input_wide(rows, few)}
    objective = open_objective or TargetLoss(
        partial(compute_loss, task=meta.task, label_smoothing=float(config.loss.label_smoothing),
                z_loss=float(config.loss.z_loss), ignore_index=meta.ignore_index, function=meta.loss_function,
                target_scale=pick_output.target_scale), pick_output, meta.ignore_index)
    if facts is not None:
        def scored(batch: tuple[Any, Any]) -> Callable[[], torch.Tensor]:
            inputs = (to_device(batch[0], device), None) if open_objective is not None else (
                batch[0].to(device), batch[1].to(device))
            return lambda: objective.score(raw_model, *inputs).loss

        facts["forward"] = forward_facts(raw_model, scored((x, y)), batch_size(x))
        facts.update(announced(code_facts(raw_model, scored((x, y)), batch_size(x))) or {})
        facts["initial_losses"] = untrained_losses(raw_model, [
            scored(fetch(train_set, recipe, spread_indices(len(train_set), micro_batch, seed)))
            for seed in INITIAL_BATCHES])
    metrics = checked_metrics(config, raw_model, pick_output, open_objective, meta, (x, y), device, dist)
    user_callbacks = build_user_callbacks(config.callbacks)
    seed_everything(run.seed + dist.rank)  # identical weights on every rank, own dropout draws per rank
    parallel = config.parallel
    sharded = is_sharded(parallel)
    model = parallelize(raw_model, parallel, config.precision.name, device, dist)  # fsdp shards raw_model in place
    optimizer = build_optimizer(optimizer_config(config.optim, parallel), raw_model)  # over the shards, when sharded
    scheduler = build_scheduler(config.schedule, optimizer, config.trainer.max_steps)
    live_lr = LiveLR(optimizer, scheduler)
    precision = build_precision(config.precision, device)
    if run.compile:
        model = torch.compile(model)
    reporter = TrialReporter.from_env()
    if reporter is not None and reporter.sweeper_pid is not None:
        watch_sweeper(reporter.sweeper_pid)

    loader = data.loading.settings(device.type)
    # Batch norm cannot normalise a micro-batch of one sample: such models skip an epoch tail
    # too small to give every micro-batch two.
    min_batch = dist.world_size * (2 * run.accum if has_batch_norm(raw_model) else 1)
    stream = BatchStream(len(train_set), run.batch_size, run.seed, dist.world_size, data.loading.shuffle,
                         min_batch)
    batches = TrainBatches(train_set, recipe, loader, stream, dist.rank, dist.world_size, run.accum, run.seed)
    evaluator = build_evaluator(config, raw_model=raw_model, model=model, pick_output=pick_output,
                                open_objective=open_objective, precision=precision,
                                train_set=train_set, val_set=val_set, meta=meta, recipe=recipe, loader=loader,
                                micro_batch=micro_batch, device=device, dist=dist, sharded=sharded, metrics=metrics)
    watched, reported = resolve_selection(config.trainer.monitor, config.trainer.monitor_mode, config.job.objective,
                                          evaluator.logged, SUMMARY_OBJECTIVES,
                                          reporter.direction if reporter is not None else None)
    guard, faults = Guard(config.guard, dist, device), FaultInjector(config.fault, dist.rank)
    monitor = Monitor(config.monitor, raw_model, config.trainer.max_steps, dist)
    clip = ClipSettings(run.clip, run.clip_mode, run.accum_reduction == "mean")
    train_step = TrainStep(model=model, params=[p for p in raw_model.parameters() if p.requires_grad],
                           optimizer=optimizer, live_lr=live_lr, precision=precision, guard=guard, objective=objective,
                           pick_output=pick_output, clip=clip, monitor=monitor,
                           log_every=config.trainer.log_every, faults=faults, device=device, dist=dist)
    closed_form = flops_per_update(raw_model, run.batch_size)

    def attribute_update(micro_batches: list) -> Any:
        """Score the samples of a skipped update one by one (this rank's share): which stood out.
        An open objective scores batches, not samples: nothing to tell apart."""
        if objective.open:
            return None
        indices = torch.cat([mb.indices for mb in micro_batches])
        xs, ys = fetch(train_set, recipe, indices)
        return attribute(raw_model, pick_output, xs.to(device), ys.to(device), indices.tolist(), meta.task,
                         meta.ignore_index, meta.loss_function)

    cadence = Cadence(config.trainer, dist, device)
    callbacks: list[Any] = [
        GuardWatch(guard, faults, attribute_update, meta.ignore_index),
        MetricsLog(monitor=monitor, precision=precision, clip=clip, batch_size=run.batch_size,
                   tokens_per_sample=meta.block_size if meta.task == "lm" else None,
                   peak=peak_flops(device, config.precision.name, config.perf.peak_tflops),
                   flops=closed_form / dist.world_size if closed_form is not None else None, device=device, dist=dist),
        Baseline(evaluator), Evaluation(evaluator), BestCheckpoint(watched),
        EarlyStop(EarlyStopping(config.early_stop, watched.mode), watched),
        Checkpointing(cadence.stop_request)]
    if config.diagnose.live:
        callbacks.append(LiveDiagnosisCallback(config.diagnose))
    if reporter is not None:
        callbacks.append(SweepReport(reporter, reported))
    tracker = None  # rank 0 of a training run logs; lr_find and doctor drive the trainer for their own purposes
    recorded = OmegaConf.to_container(config.record, resolve=True)  # as checkpoints and trackers record it
    if dist.is_main and run.mode == "train":
        info = RunInfo(run_dir, recorded,
                       study=reporter.study_name if reporter is not None else None,
                       trial=reporter.number if reporter is not None else None)
        tracker = Tracker(info, config.logger, config.trainer.max_steps, console)
    model_state = ModelState(raw_model, sharded)
    trainer = Trainer(config=recorded, checkpoints_kept=config.trainer.keep_last,
                      train_step=train_step, batches=batches, cadence=cadence,
                      callbacks=Callbacks([*callbacks, *user_callbacks.values()],
                                          user={id(cb): name for name, cb in user_callbacks.items()}),
                      parts={"model": model_state, "optimizer": OptimizerState(raw_model, optimizer, sharded),
                             "scheduler": scheduler,
                             "scaler": ScalerState(precision.scaler), "data": batches, "faults": faults, "monitor": monitor},
                      checkpoints=ShardedCheckpoints(dist) if sharded else FileCheckpoints(dist),
                      meta=meta, raw_model=raw_model, device=device, dist=dist, run_dir=run_dir,
                      tracker=tracker, facts=facts)
    if resume_from:
        try:
            trainer.load_state_dict(resume_from[1])
        except (RuntimeError, KeyError, ValueError, IndexError) as err:  # another model's or optimizer's shapes
            raise ConfigError("resume", str(resume_from[0]), f"a checkpoint written by this configuration: "
                                                             f"loading it raised {one_line(err)}") from None
        check_resume_point(config, resume_from[1].get("config"), trainer.state.step, resume_from[0])
        if trainer.state.ended and not same_run(recorded, resume_from[1].get("config")):
            trainer.state.ended = None  # another config (a remedy, an extension) trains on from the stop
        log.info("resumed from %s at step %d", resume_from[0], trainer.state.step)
    run_dir.mkdir(parents=True, exist_ok=True)  # only now: a configuration that cannot train, or a
    # checkpoint that does not fit it, leaves nothing
    if dist.is_main:
        for path in remove_stale_temp_files(run_dir):
            log.info("removed %s, left by a checkpoint write that was interrupted", path)
        OmegaConf.save(config.record, run_dir / "config.yaml", resolve=True)
        if meta.tokenizer_file:  # subword ids: keep what decodes them beside the checkpoints
            (run_dir / "tokenizer.json").write_bytes(Path(meta.tokenizer_file).read_bytes())
    if tracker is not None:
        tracker.open(trainer.state.step)
    n_params = sum(p.numel() for p in raw_model.parameters())
    log.info("model %s: %.2fM parameters; data %s (%s); device %s; precision %s",
             class_name(raw_model), n_params / 1e6, data.name, meta.task, device, config.precision.name)
    where = [f"{dist.world_size} processes"] if dist.enabled else []
    if os.environ.get("SLURM_JOB_ID"):  # what a user looking for the job on the cluster needs
        where.append(f"SLURM job {os.environ['SLURM_JOB_ID']} on {socket.gethostname()}")
    if where:
        log.info("running as %s", ", ".join(where))
    return Assembly(trainer=trainer, config=config, raw_model=raw_model, meta=meta, device=device, dist=dist,
                    train_set=train_set, val_set=val_set, test_set=splits.test, recipe=recipe, micro_batch=micro_batch,
                    train_step=train_step, evaluator=evaluator, model_state=model_state)


def build_evaluator(config: RunConfig, *, raw_model: nn.Module, model: nn.Module, pick_output: OutputPicker,
                    open_objective: OpenObjective | None, precision: Precision, train_set: Dataset,
                    val_set: Dataset, meta: DataMeta, recipe: BatchRecipe, loader: LoaderSettings, micro_batch: int,
                    device: torch.device, dist: DistInfo,
                    sharded: bool = False, metrics: EvalMetrics | None = None) -> Evaluator:
    """The same validation samples at every eval, each rank its share; plus training samples in
    eval mode for models whose eval mode differs (batch norm, dropout). `open_objective`: the
    user's objective, which scores whole batches (None: the built-in loss)."""
    val_batches, eval_sample = eval_batches(config, val_set, recipe, loader, micro_batch, dist, sharded)
    prior = {"val_prior_loss": prior_loss(val_set, meta, eval_sample),
             "val_majority_share": majority_share(val_set, meta, eval_sample), "eval_samples": len(eval_sample)}
    train_batches = None
    if behaves_differently_in_eval(raw_model):
        train_batches, _ = eval_batches(config, train_set, recipe, loader, micro_batch, dist, sharded, "train")
    return Evaluator(model=model, pick_output=pick_output, precision=precision,
                     loss_fn=partial(compute_loss, task=meta.task, ignore_index=meta.ignore_index,
                                     function=meta.loss_function), meta=meta,
                     batches=val_batches, train_batches=train_batches, prior=prior, device=device, dist=dist,
                     open_objective=open_objective, metrics=metrics)


def checked_metrics(config: RunConfig, raw_model: nn.Module, pick_output: OutputPicker,
                    open_objective: OpenObjective | None, meta: DataMeta, first: tuple[Any, Any],
                    device: torch.device, dist: DistInfo) -> EvalMetrics:
    """The metrics each eval measures, run once on the untrained model's first micro-batch (in eval
    mode, the RNG streams left as they were) so that one that cannot be fed fails before training."""
    metrics = build_eval_metrics(config.metrics, task=meta.task, loss_function=meta.loss_function,
                                 open_objective=open_objective is not None, device=device, dist=dist)
    if not config.metrics:
        return metrics
    with torch.no_grad(), untouched(raw_model):
        if open_objective is not None:
            batch = to_device(first[0], device)
            output = open_objective.call(raw_model, batch)
        else:
            batch = (first[0].to(device), first[1].to(device))
            output = pick_output(raw_model(batch[0]))
        metrics.check(output, batch, torch.tensor(float(batch_size(first[0])), device=device))
    return metrics


def eval_batches(config: RunConfig, dataset: Dataset, recipe: BatchRecipe, loader: LoaderSettings, micro_batch: int,
                 dist: DistInfo, sharded: bool = False, split: str = "val") -> tuple[EvalBatches, torch.Tensor]:
    """A split's fixed eval sample (`trainer.eval_batches` batches of `batch_size` samples, the same
    samples whatever `accum` and the number of ranks) as this rank's micro-batches, and the whole
    sample (every rank's)."""
    count = config.trainer.eval_batches * config.run.batch_size
    stride = eval_stride(config, dataset)
    indices = eval_indices(len(dataset), count) if stride == 1 else torch.arange(0, len(dataset), stride)[:count]
    sample = _equal_shares(indices, dist, sharded)
    share = sample.tensor_split(dist.world_size)[dist.rank]
    return EvalBatches(dataset, recipe, loader, share, micro_batch, config.run.seed, split), sample


def eval_stride(config: RunConfig, dataset: Dataset) -> int:
    """mode=eval's step between scored samples: `eval.stride`, or for token windows (one per token
    position, each overlapping the next by all but one token) their length, so that every token is
    scored once; training's evals keep their fixed sample."""
    if config.run.mode != "eval":
        return 1
    return config.job.eval_stride or int(getattr(dataset, "block_size", 1))


def _equal_shares(sample: torch.Tensor, dist: DistInfo, sharded: bool) -> torch.Tensor:
    """A sharded model's forward is a collective, so every rank must evaluate as many batches: a
    split smaller than the eval sample is trimmed to a multiple of the world size (a rank with one
    batch more would wait for the others forever)."""
    if not sharded:
        return sample
    return sample[:len(sample) - len(sample) % dist.world_size]

