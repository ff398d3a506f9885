"""Build every component from the validated config, resume if asked, train, write summary.json."""
from __future__ import annotations

import logging
import math
import random
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from harness.checkpoint import atomic_json_dump, latest_valid_checkpoint, load_checkpoint
from harness.config import validate_config
from harness.data import BatchRecipe, build_data, loader_settings
from harness.data.checks import spread_indices
from harness.data.loader import fetch
from harness.distributed import DistInfo, barrier, destroy_process_group, dist_info_from_env, init_process_group
from harness.errors import ConfigError, one_line
from harness.lr_scaling import apply_lr_scaling
from harness.models import build_model
from harness.models.init import apply_init
from harness.models.output import OutputPicker
from harness.models.probe import check_batch_norm, probe_model
from harness.optim import build_optimizer
from harness.precision import build_precision
from harness.rundir import claim_run_dir, remove_stale_temp_files
from harness.schedule import build_scheduler
from harness.tracking import Tracker, finite_or_none
from harness.trainer import Trainer
from harness.trial import TrialReporter, watch_sweeper

log = logging.getLogger("harness")


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def hydra_run_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def find_resume_checkpoint(resume: str | None, run_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """`auto`: this run dir's newest valid checkpoint, or a fresh start when there is none."""
    if resume is None:
        return None
    if resume == "auto":
        return latest_valid_checkpoint(run_dir)
    path = Path(resume)
    if path.is_file():
        try:
            return path, load_checkpoint(path)
        except Exception as err:  # noqa: BLE001 - any unreadable file is the same user error
            raise ConfigError("resume", resume, f"a readable checkpoint file ({type(err).__name__})") from None
    found = latest_valid_checkpoint(path)
    if found is None:
        raise ConfigError("resume", resume, "a run directory with at least one valid checkpoint in checkpoints/")
    return found


def summarize(trainer: Trainer, status: str, wall_time: float, cfg: DictConfig) -> dict[str, Any]:
    s = trainer.state
    summary = {
        "status": status,
        "reason": s.events[-1]["message"] if status != "completed" and s.events else None,
        "steps": s.step,
        "max_steps": int(cfg.trainer.max_steps),
        "best_val_loss": finite_or_none(s.best_val_loss),
        "final_val_loss": finite_or_none(s.last_val_loss),
        "final_train_loss": finite_or_none(s.last_train_loss),
        "best_val_accuracy": s.best_val_accuracy,
        "wall_time_s": round(wall_time, 3),
        "skipped_steps": s.skipped_steps,
        "overflow_steps": trainer.total_overflow_steps(),
        "events": s.events,
        "task": trainer.meta.task,
        "chance_loss": trainer.meta.chance_loss,
        "optimum_loss": trainer.meta.optimum_loss,
        "modules": sorted({type(m).__name__ for m in trainer.raw_model.modules()}),  # what the rules may ask of
    }
    names = list(cfg.objective) if OmegaConf.is_list(cfg.objective) else [cfg.objective]
    values = [summary[name] for name in names]
    summary["objective"] = values if len(values) > 1 else values[0]
    return summary


def run(cfg: DictConfig, run_dir: Path | None = None) -> Any:
    """Train one run; returns the objective (a float, a list for multi-objective, or NaN)."""
    dist = dist_info_from_env()
    device = validate_config(cfg, dist.world_size)
    cfg = apply_lr_scaling(cfg)
    run_dir = Path(run_dir) if run_dir is not None else hydra_run_dir()
    if dist.is_main:
        claim_run_dir(run_dir, cfg.resume, cfg.overwrite)
    resume_from = find_resume_checkpoint(cfg.resume, run_dir)
    if dist.enabled and device.type == "cuda":
        device = torch.device("cuda", dist.local_rank)
    if cfg.mode == "lr_find":
        from harness.lr_find import run_lr_find

        return run_lr_find(cfg, run_dir, device)
    if cfg.mode == "doctor":
        from harness.doctor import run_doctor

        return run_doctor(cfg, run_dir, device)
    init_process_group(dist, device)
    try:
        objective = _train(cfg, run_dir, device, dist, resume_from)
        barrier(dist)  # rank 0 may still be writing summary.json and the report
        return objective
    finally:
        destroy_process_group()


def build_trainer(cfg: DictConfig, run_dir: Path, device: torch.device,
                   resume_from: tuple[Path, dict[str, Any]] | None, dist: DistInfo = DistInfo()) -> Trainer:
    """Every component from its config group, wired into a Trainer (resumed when asked)."""
    seed_everything(cfg.seed)
    train_set, val_set, meta = build_data(cfg.data)
    recipe = BatchRecipe.from_config(cfg.data)
    raw_model = build_model(cfg.model, meta)
    apply_init(raw_model, cfg.init)
    raw_model.to(device)
    pick_output = OutputPicker(cfg.model_output)
    micro_batch = cfg.batch_size // (cfg.accum * dist.world_size)
    check_batch_norm(raw_model, micro_batch, cfg.batch_size)
    x, y = fetch(train_set, recipe, spread_indices(len(train_set), micro_batch))
    probe_model(raw_model, pick_output, meta, x.to(device), y.to(device), cfg.model._target_)
    seed_everything(cfg.seed + dist.rank)  # identical weights on every rank, own dropout draws per rank
    optimizer = build_optimizer(cfg.optim, raw_model)
    scheduler = build_scheduler(cfg.schedule, optimizer, cfg.trainer.max_steps)
    precision = build_precision(cfg.precision, device)
    model = raw_model
    if dist.enabled:
        model = torch.nn.parallel.DistributedDataParallel(
            raw_model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.compile:
        model = torch.compile(model)
    reporter = TrialReporter.from_env()
    if reporter is not None and reporter.sweeper_pid is not None:
        watch_sweeper(reporter.sweeper_pid)
    trainer = Trainer(cfg, model=model, raw_model=raw_model, optimizer=optimizer, scheduler=scheduler,
                      precision=precision, train_set=train_set, val_set=val_set, meta=meta, recipe=recipe,
                      loader=loader_settings(cfg.data, device.type), pick_output=pick_output, device=device,
                      dist=dist, run_dir=run_dir, tracker=None, reporter=reporter)
    if resume_from:
        try:
            trainer.load_state_dict(resume_from[1])
        except (RuntimeError, KeyError, ValueError, IndexError) as err:  # another model's or optimizer's shapes
            raise ConfigError("resume", str(resume_from[0]), f"a checkpoint written by this configuration: "
                                                             f"loading it raised {one_line(err)}") from None
        log.info("resumed from %s at step %d", resume_from[0], trainer.state.step)
    elif cfg.resume == "auto":
        log.info("resume=auto: no checkpoint in %s, starting fresh", run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)  # only now: a configuration that cannot train, or a
    # checkpoint that does not fit it, leaves nothing
    if dist.is_main:
        for path in remove_stale_temp_files(run_dir):
            log.info("removed %s, left by a checkpoint write that was interrupted", path)
        OmegaConf.save(cfg, run_dir / "config.yaml", resolve=True)
        if meta.tokenizer_file:  # subword ids: keep what decodes them beside the checkpoints
            (run_dir / "tokenizer.json").write_bytes(Path(meta.tokenizer_file).read_bytes())
    if dist.is_main and cfg.mode == "train":  # lr_find and doctor drive the trainer for their own purposes
        trainer.tracker = Tracker(run_dir, cfg.logger.name, cfg.trainer.max_steps, trainer.state.step)
    n_params = sum(p.numel() for p in raw_model.parameters())
    log.info("model %s: %.2fM parameters; data %s (%s); device %s; precision %s",
             type(raw_model).__name__, n_params / 1e6, cfg.data.name, meta.task, device, cfg.precision.name)
    return trainer


def write_diagnosis(run_dir: Path) -> None:
    """The post-run report; a failure to plot must not cost the user a finished run."""
    try:
        from harness.diagnosis import write_report

        findings = write_report(run_dir)
    except Exception as err:  # noqa: BLE001 - the run itself is complete and saved
        log.warning("diagnosis failed (%s: %s); the run is complete", type(err).__name__, err)
        return
    for finding in findings:
        log.warning("diagnosis: %s", finding.summary_line())
    log.info("diagnosis report: %s", run_dir / "report.md")


def _train(cfg: DictConfig, run_dir: Path, device: torch.device, dist: DistInfo,
           resume_from: tuple[Path, dict[str, Any]] | None) -> Any:
    started = time.perf_counter()
    trainer = build_trainer(cfg, run_dir, device, resume_from, dist)
    try:
        status = trainer.fit()
    finally:
        trainer.close()
    summary = summarize(trainer, status, time.perf_counter() - started, cfg)
    if dist.is_main:
        atomic_json_dump(summary, run_dir / "summary.json")
        log.info("%s after %d steps: best val loss %s -> %s", status, summary["steps"],
                 summary["best_val_loss"], run_dir / "summary.json")
        if cfg.diagnose:
            write_diagnosis(run_dir)
    objective = summary["objective"]
    if isinstance(objective, list):
        return [math.nan if v is None else v for v in objective]
    return math.nan if objective is None else objective
