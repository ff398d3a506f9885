"""Validate the whole composed config before any work: a bad value fails in milliseconds,
with one line naming the key, the value and what is allowed. What validation reads it returns,
typed (RunConfig): the builders take their own part of it and read no group a second time."""
from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.loop.callbacks.user import CallbackSpec, validate_callbacks_config
from harness.core.metric_names import VAL_LOSS_PART
from harness.training.metrics.monitored import check_objectives, default_objectives, may_log, resolve_monitor
from harness.training.metrics.spec import MetricSpec, validate_metrics_config
from harness.state.checkpoint import is_sharded_checkpoint
from harness.training.clipping import validate_clip
from harness.core.config_keys import check_known_keys
from harness.core.overrides import overridden
from harness.data import DataConfig, validate_data_config
from harness.data.custom import AUTO_TASK, custom_task
from harness.diagnosis.live import DiagnoseSettings, diagnose_settings, validate_diagnose_config
from harness.training.early_stop import EarlyStopConfig, early_stop_config
from harness.core.errors import ConfigError
from harness.training.faults import FaultConfig, fault_config
from harness.training.perf import PerfConfig, perf_config
from harness.training.guard import GuardConfig, guard_config
from harness.loop.cadence import TrainerConfig, trainer_config
from harness.training.loss import LossConfig, loss_config
from harness.training.objective import FINAL_PART, MODEL_LOSS, ObjectiveSpec
from harness.training.scale_lr import ScaleLRConfig, lr_scaling, scale_lr_config
from harness.models import ModelSpec, validate_model_config
from harness.models.activation_swap import validate_activation_swap
from harness.models.output_activation import validate_output_activation
from harness.models.init import InitConfig, validate_init_config
from harness.training.monitor import MonitorConfig, monitor_config
from harness.training.optim import OptimSpec, validate_optim_config
from harness.training.parallel import ParallelConfig, is_sharded, validate_parallel_config
from harness.training.precision import PrecisionConfig, validate_precision_config
from harness.training.schedule import ScheduleConfig, validate_schedule_config
from harness.logger.tracking import logger_settings
from harness.core.typed_config import read_typed
from harness.core.validation import is_whole
from harness.config.doctor import DoctorConfig
from harness.config.lr_find import LRFindConfig
from harness.data.base import NO_TASK, TASKS

MODES = ("train", "lr_find", "doctor", "eval")
SUMMARY_OBJECTIVES = ("best_val_loss", "final_val_loss", "final_train_loss", "wall_time_s", "best_val_accuracy")
FIXED_TASKS = {"stdlib": "lm", "text": "lm", "tokens": "lm", "digits": "classification"}


@dataclass(frozen=True)
class RunKeys:
    """The top-level keys of conf/train.yaml that shape the run (their defaults live there)."""

    mode: str
    device: str  # as written (auto, cuda, ...); RunConfig.device is the one it names
    batch_size: int
    accum: int
    accum_reduction: str  # mean | sum
    seed: int
    clip: float  # 0.0: off
    clip_mode: str
    compile: bool
    model_output: str | int
    activation_swap: str | None
    output_activation: str | None


@dataclass(frozen=True)
class JobKeys:
    """What this invocation does with its run dir and what it reports (conf/train.yaml)."""

    resume: str | None  # null, auto, or a run dir or checkpoint
    overwrite: bool
    objective: tuple[str, ...]  # summary.json fields: one gives a sweep a float, several a list
    eval_checkpoint: str  # mode=eval: best, last, or a path
    eval_batches: int | None  # mode=eval: null scores the whole split
    eval_stride: int | None  # mode=eval: every Nth window or sample; null: non-overlapping windows of token data
    eval_other_model: bool = False  # mode=eval: a checkpoint of a model built another way is scored, not refused


@dataclass(frozen=True)
class RunConfig:
    """The composed config, checked, with every group read once into its typed form. The run reads
    only the typed parts. `record` is the composed config they were read from: what the run writes
    down (config.yaml, checkpoints, trackers), and what `with_overrides` changes before reading it
    again; read back, it gives these same typed parts (tests/unit/core/test_config_record.py)."""

    record: DictConfig
    device: torch.device  # the one `device` names; a torchrun rank takes its local GPU (modes/run.py)
    run: RunKeys
    job: JobKeys
    trainer: TrainerConfig
    precision: PrecisionConfig
    schedule: ScheduleConfig
    data: DataConfig
    model: ModelSpec
    init: InitConfig
    optim: OptimSpec
    callbacks: dict[str, CallbackSpec]  # the user's, by name
    metrics: dict[str, MetricSpec]  # the user's, by name (logged as val/NAME)
    parallel: ParallelConfig
    loss: LossConfig
    user_loss: ObjectiveSpec | None  # loss._target_ or loss.function=model: the run trains on whole batches
    guard: GuardConfig
    monitor: MonitorConfig
    early_stop: EarlyStopConfig
    fault: FaultConfig
    perf: PerfConfig
    scale_lr: ScaleLRConfig
    logger: dict[str, Any]  # sink name -> its typed settings
    diagnose: DiagnoseSettings
    lr_find: LRFindConfig
    doctor: DoctorConfig

    def with_overrides(self, overrides: Sequence[str], world_size: int = 1) -> RunConfig:
        """This config with `key=value` overrides applied as Hydra applies them, checked again on
        the same device: the one way LR scaling, mode=eval, the LR finder and the remedies derive a
        changed config, so the record and the typed parts cannot drift apart."""
        if not overrides:
            return self
        return replace(validate_config(overridden(self.record, overrides), world_size), device=self.device)

    def with_lr_scaling(self, world_size: int = 1) -> RunConfig:
        """`scale_lr`: optim.lr and schedule.warmup rescaled for the batch size; itself when off."""
        overrides = lr_scaling(self.run.batch_size, self.optim.options.get("lr"), self.schedule.warmup, self.scale_lr)
        return self.with_overrides(overrides, world_size)


BEST_PART = "best_val_loss_"  # summary.json's best of each part of your objective's


def _positive_int(key: str, value: object) -> None:
    if not is_whole(value) or value < 1:
        raise ConfigError(key, value, "an integer >= 1")


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ConfigError("device", name, "auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", name, "auto or cpu: this machine has no CUDA device")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigError("device", name, f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device", name, "auto or cpu: MPS is not available here")
    if device.type not in ("cpu", "cuda", "mps"):
        raise ConfigError("device", name, "auto, cpu, cuda, cuda:N or mps")
    return device


def with_data_task(cfg: DictConfig) -> DictConfig:
    """data=custom's `data.task=auto` settled by the loss: the record keeps the task the run took."""
    task = cfg.data.get("task")
    if cfg.data.get("name") != "custom" or task != AUTO_TASK:
        return cfg
    loss = cfg.get("loss") or {}
    open_objective = loss.get("_target_") is not None or loss.get("function") == MODEL_LOSS
    settled = copy.deepcopy(cfg)
    settled.data.task = custom_task(task, open_objective)
    return settled


def data_task(cfg: DictConfig) -> str:
    """The task the data option declares: fixed by the option (text and token corpora are language
    modelling, digits is classification), or its `data.task`."""
    name, task = cfg.data.get("name"), cfg.data.get("task")
    if name == "custom" and task is None:
        return NO_TASK  # data=custom data.task=null: batches of any structure, for the user's objective
    return FIXED_TASKS.get(name) or task or "lm"


def check_open_data(cfg: DictConfig, data: DataConfig, user_loss: ObjectiveSpec | None) -> None:
    """Data without a task (data=custom data.task=null) has no built-in loss; standardisation reads
    (input, target) pairs, which an open objective's batches need not be."""
    if cfg.data.get("name") == "custom" and cfg.data.get("task") is None and user_loss is None:
        raise ConfigError("data.task", None, f"one of {list(TASKS)}, or null with loss._target_=mypkg.objective "
                                             f"(or loss.function=model): a task-less dataset needs your objective")
    if user_loss is not None:
        for key in ("standardize", "standardize_targets"):
            if getattr(data.loading, key):
                raise ConfigError(f"data.{key}", True, f"false with {user_loss.key}={user_loss.path}: its batches "
                                                       f"go whole to the objective; scale them in your dataset")


def validate_model_output(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or value == "":
        raise ConfigError("model_output", value, "auto, the name of an output field (e.g. logits) or a tuple position")


def validate_resume(resume: object) -> None:
    if resume in (None, "auto"):
        return
    path = Path(str(resume))
    if not (path.is_file() or (path / "checkpoints").is_dir() or is_sharded_checkpoint(path)):
        raise ConfigError("resume", resume, "null, auto, a run directory holding checkpoints/, a checkpoint .pt file "
                                            "or a sharded checkpoint's .dcp directory")


def validate_config(cfg: DictConfig, world_size: int = 1, choices: Mapping[str, str] | None = None) -> RunConfig:
    """Check every key; return what was read, typed. `choices`: Hydra's group choices (which option
    each group took), for refusing keys that option does not read."""
    try:
        OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", "") or "config"
        raise ConfigError(key, "???", "a value: this key is required (set it on the command line)") from None
    check_known_keys(cfg, choices)
    cfg = with_data_task(cfg)
    trainer = trainer_config(cfg.trainer)
    _positive_int("batch_size", cfg.batch_size)
    _positive_int("accum", cfg.accum)
    if cfg.batch_size % (cfg.accum * world_size):
        raise ConfigError("batch_size", cfg.batch_size,
                          f"a multiple of accum x world size = {cfg.accum} x {world_size}")
    if not is_whole(cfg.seed) or not 0 <= cfg.seed < 2**32:
        raise ConfigError("seed", cfg.seed, "an integer in [0, 2**32) (numpy's seed range)")
    for key in ("compile", "overwrite"):
        if not isinstance(cfg[key], bool):
            raise ConfigError(key, cfg[key], "true or false")
    validate_diagnose_config(cfg.diagnose)
    diagnose = diagnose_settings(cfg.diagnose)
    callbacks = validate_callbacks_config(cfg.get("callbacks"))
    metrics = validate_metrics_config(cfg.get("metrics"))
    if cfg.accum_reduction not in ("mean", "sum"):
        raise ConfigError("accum_reduction", cfg.accum_reduction, "mean or sum")
    if cfg.mode not in MODES:
        raise ConfigError("mode", cfg.mode, f"one of {list(MODES)}")
    validate_clip(cfg.clip, cfg.clip_mode)
    device = resolve_device(str(cfg.device))
    precision = validate_precision_config(cfg.precision, device)
    parallel = validate_parallel_config(cfg.get("parallel"), world_size, device, cfg.optim.get("_target_"))
    if is_sharded(parallel) and cfg.mode != "train":
        raise ConfigError("parallel", parallel.name, f"none or ddp with mode={cfg.mode} (it runs in one process)")
    schedule = validate_schedule_config(cfg.schedule, trainer.max_steps)
    optim = validate_optim_config(cfg.optim)
    data = validate_data_config(cfg.data)
    model = validate_model_config(cfg.model, data_task(cfg))
    validate_model_output(cfg.model_output)
    validate_activation_swap(cfg.activation_swap)
    validate_output_activation(cfg.output_activation)
    init = validate_init_config(cfg.init)
    (loss, user_loss), scale_lr = loss_config(cfg.loss), scale_lr_config(cfg.scale_lr)
    logger = logger_settings(cfg.get("logger"))
    check_open_data(cfg, data, user_loss)
    monitor, guard, early_stop = monitor_config(cfg.monitor), guard_config(cfg.guard), early_stop_config(cfg.early_stop)
    fault, perf = fault_config(cfg.fault), perf_config(cfg.perf)
    validate_resume(cfg.resume)
    checkpoint = cfg.get("eval", {}).get("checkpoint")
    if not isinstance(checkpoint, (str, int)) or isinstance(checkpoint, bool) or checkpoint == "":
        # an int is a path Hydra read as a number (a run dir named 2024)
        raise ConfigError("eval.checkpoint", checkpoint, "best, last, or the path of a checkpoint or run dir")
    batches = cfg.get("eval", {}).get("batches")
    if batches is not None and (not is_whole(batches) or batches < 1):
        raise ConfigError("eval.batches", batches, "null (every validation sample) or an integer >= 1")
    stride = cfg.get("eval", {}).get("stride")
    if stride is not None and (not is_whole(stride) or stride < 1):
        raise ConfigError("eval.stride", stride, "null (token data: non-overlapping windows) or an integer >= 1")
    other_model = cfg.get("eval", {}).get("other_model", False)
    if not isinstance(other_model, bool):
        raise ConfigError("eval.other_model", other_model, "true or false")
    logged = may_log(metrics)
    if not (user_loss is not None and trainer.monitor.startswith(VAL_LOSS_PART)):  # parts: known once it runs
        resolve_monitor(trainer.monitor, trainer.monitor_mode, logged)
    objectives = default_objectives(cfg.objective, trainer.monitor)
    for name in objectives:
        if user_loss is not None and str(name).startswith((FINAL_PART, BEST_PART)):
            continue  # a part of the objective's: its parts are known once it runs (assembly checks them)
        try:
            check_objectives((str(name),), logged, SUMMARY_OBJECTIVES)
        except ConfigError:
            raise ConfigError("objective", name, f"one of {list(SUMMARY_OBJECTIVES)}, best_val_NAME or final_val_NAME "
                                                 f"of a metric (metrics.NAME, val/perplexity, ...), or "
                                                 f"{FINAL_PART}PART for a part your objective (loss._target_) logs"
                              ) from None
    lr_find = read_typed(cfg.get("lr_find"), LRFindConfig, "lr_find")
    doctor = read_typed(cfg.get("doctor"), DoctorConfig, "doctor")
    run = RunKeys(mode=cfg.mode, device=str(cfg.device), batch_size=cfg.batch_size, accum=cfg.accum,
                  accum_reduction=cfg.accum_reduction, seed=cfg.seed, clip=float(cfg.clip) if cfg.clip else 0.0,
                  clip_mode=cfg.clip_mode, compile=cfg.compile, model_output=cfg.model_output, activation_swap=cfg.activation_swap,
                  output_activation=cfg.output_activation)
    job = JobKeys(resume=cfg.resume, overwrite=cfg.overwrite, objective=tuple(objectives),
                  eval_checkpoint=str(checkpoint), eval_batches=batches, eval_stride=stride,
                  eval_other_model=other_model)
    return RunConfig(record=cfg, device=device, run=run, job=job, trainer=trainer, precision=precision,
                     schedule=schedule, data=data, model=model, init=init, optim=optim, callbacks=callbacks, metrics=metrics,
                     parallel=parallel, loss=loss, user_loss=user_loss, guard=guard, monitor=monitor,
                     early_stop=early_stop, fault=fault, perf=perf, scale_lr=scale_lr, logger=logger, diagnose=diagnose,
                     lr_find=lr_find, doctor=doctor)

