"""Assemble a Trainer from the validated config: every component from its config group, wired
together, resumed when asked. Training (run.py), the doctor and the LR finder all start here,
so imports flow one way: entry -> modes -> assembly -> components."""
from __future__ import annotations

import logging
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from harness.data import BatchRecipe, build_data, loader_settings
from harness.data.checks import spread_indices
from harness.data.facts import input_stats, split_facts
from harness.data.loader import fetch
from harness.distributed import DistInfo
from harness.errors import ConfigError, one_line
from harness.models import build_model
from harness.models.init import apply_init
from harness.models.output import OutputPicker
from harness.models.probe import check_batch_norm, parameter_counts, probe_model
from harness.optim import build_optimizer
from harness.precision import build_precision
from harness.rundir import remove_stale_temp_files
from harness.schedule import build_scheduler, check_schedule_continues
from harness.tracking import Tracker
from harness.trainer import Trainer
from harness.trial import TrialReporter, watch_sweeper

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


def check_resume_point(cfg: DictConfig, saved: dict[str, Any] | None, step: int, checkpoint: Path) -> None:
    """A resume must have steps left to train, and must not jump the LR (the schedule that
    trained to `step` and the one that continues agree there)."""
    if step >= cfg.trainer.max_steps:
        raise ConfigError("resume", str(cfg.resume), f"a checkpoint before trainer.max_steps={cfg.trainer.max_steps}: "
                                                     f"{checkpoint.name} is at step {step}, so nothing would train "
                                                     f"(raise trainer.max_steps to train it further)")
    if saved is not None:
        check_schedule_continues(OmegaConf.create(saved), cfg, step)


def build_trainer(cfg: DictConfig, run_dir: Path, device: torch.device,
                   resume_from: tuple[Path, dict[str, Any]] | None, dist: DistInfo = DistInfo()) -> Trainer:
    """Every component from its config group, wired into a Trainer (resumed when asked)."""
    seed_everything(cfg.seed)
    train_set, val_set, meta = build_data(cfg.data, cfg.loss.get("ignore_index"))
    check_batch_fits(cfg.batch_size, len(train_set), cfg.data.name)
    recipe = BatchRecipe.from_config(cfg.data)
    raw_model = build_model(cfg.model, meta)
    apply_init(raw_model, cfg.init)
    raw_model.to(device)
    pick_output = OutputPicker(cfg.model_output)
    micro_batch = cfg.batch_size // (cfg.accum * dist.world_size)
    check_batch_norm(raw_model, micro_batch, cfg.batch_size)
    x, y = fetch(train_set, recipe, spread_indices(len(train_set), micro_batch))
    probe_model(raw_model, pick_output, meta, x.to(device), y.to(device), cfg.model._target_)
    facts = None
    if dist.is_main and cfg.mode == "train":  # what summary.json tells the diagnosis; only rank 0 writes it
        facts = {"parameters": parameter_counts(raw_model), **split_facts(train_set, val_set, recipe, meta.task),
                 "input_stats": input_stats(train_set, recipe)}
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
                      dist=dist, run_dir=run_dir, tracker=None, reporter=reporter, facts=facts)
    if resume_from:
        try:
            trainer.load_state_dict(resume_from[1])
        except (RuntimeError, KeyError, ValueError, IndexError) as err:  # another model's or optimizer's shapes
            raise ConfigError("resume", str(resume_from[0]), f"a checkpoint written by this configuration: "
                                                             f"loading it raised {one_line(err)}") from None
        check_resume_point(cfg, resume_from[1].get("config"), trainer.state.step, resume_from[0])
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
