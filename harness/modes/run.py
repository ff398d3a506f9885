"""Run one job: validate, claim the run dir, pick the mode; for training, assemble, train, write summary.json."""
from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from harness.assembly.assemble import assemble
from harness.remedy.driver import run_attempts
from harness.state.checkpoint import is_sharded_checkpoint, latest_valid_checkpoint, verified_checkpoint
from harness.state.files import atomic_json_dump
from harness.config.run_config import RunConfig, validate_config
from harness.core.distributed import DistInfo, barrier, destroy_process_group, dist_info_from_env, init_process_group
from harness.core.errors import ConfigError, WriteError
from harness.training.objective import FINAL_PART
from harness.training.parallel import is_sharded
from harness.state.run_dir_snapshot import accept_command
from harness.state.run_lock import run_dir_held
from harness.state.rundir import claim_run_dir, results_in, stored_objective, sweep_value
from harness.logger.console import shown_path
from harness.loop.trainer import Trainer

log = logging.getLogger("harness")


def hydra_run_dir() -> Path:
    from hydra.core.hydra_config import HydraConfig

    return Path(HydraConfig.get().runtime.output_dir)


def hydra_choices() -> dict[str, str] | None:
    """Which option each config group took, when Hydra composed this run (None under hydra.compose)."""
    from hydra.core.hydra_config import HydraConfig

    return dict(HydraConfig.get().runtime.choices) if HydraConfig.initialized() else None


def find_resume_checkpoint(resume: str | None, run_dir: Path, dist: DistInfo = DistInfo()
                           ) -> tuple[Path, dict[str, Any]] | None:
    """`auto`: this run dir's newest verified checkpoint (one WARNING line for each one passed over),
    a fresh start when it has none, a refusal when it has some and none can be trusted."""
    if resume is None:
        return None
    if resume == "auto":
        return _walk_back(run_dir, dist, fresh_start_allowed=True)
    path = Path(resume)
    if path.is_file() or is_sharded_checkpoint(path):
        state, problem = verified_checkpoint(path)
        if state is None:
            raise ConfigError("resume", resume, f"a readable checkpoint file that is whole: it is {problem}")
        return path, state
    return _walk_back(path, dist, fresh_start_allowed=False)


def _walk_back(run_dir: Path, dist: DistInfo, fresh_start_allowed: bool) -> tuple[Path, dict[str, Any]] | None:
    passed_over: list[str] = []

    def skipped(path: Path, problem: str) -> None:
        passed_over.append(f"{path.name}: {problem}")
        if dist.is_main:
            log.warning("resume: passed over %s: %s", path, problem)

    found = latest_valid_checkpoint(run_dir, skipped)
    if found is not None:
        return found
    if passed_over:
        raise ConfigError("resume", str(run_dir) if not fresh_start_allowed else "auto",
                          f"a run directory with a checkpoint that can be trusted: none of its {len(passed_over)} "
                          f"is ({'; '.join(passed_over)}). Move checkpoints/ away to start over, or overwrite=true")
    if not fresh_start_allowed:
        raise ConfigError("resume", str(run_dir), "a run directory with at least one valid checkpoint in checkpoints/")
    return None


def summarize(trainer: Trainer, status: str, wall_time: float, objective: tuple[str, ...]) -> dict[str, Any]:
    summary = {**trainer.summary(status), "wall_time_s": round(wall_time, 3)}
    for name in objective:
        if name not in summary:  # no eval measured it (or a part the objective stopped returning): a failed trial
            parts = sorted(k for k in summary if k.startswith(FINAL_PART))
            log.warning("objective=%s: no eval of this run logged it (the objective's parts: %s); reported as NaN",
                        name, ", ".join(parts) or "none")
    values = [summary.get(name, math.nan) for name in objective]
    summary["objective"] = values if len(values) > 1 else values[0]
    return summary


def run(cfg: DictConfig, run_dir: Path | None = None) -> Any:
    """Train one run; returns the objective (a float, a list for multi-objective, or NaN)."""
    dist = dist_info_from_env()
    config = validate_config(cfg, dist.world_size, hydra_choices()).with_lr_scaling(dist.world_size)
    device = rank_device(config.device, dist, config.run.device)
    run_dir = Path(run_dir) if run_dir is not None else hydra_run_dir()
    with run_dir_held(run_dir, dist.rank):  # before anything is read or written there
        return _run_held(config, run_dir, device, dist)


def _run_held(config: RunConfig, run_dir: Path, device: torch.device, dist: DistInfo) -> Any:
    mode, job = config.run.mode, config.job
    if mode == "eval":  # reads a run's checkpoint, adds eval.json: the run's own files stay as they are
        from harness.modes.eval_mode import run_eval

        return run_eval(config, run_dir, device, dist)
    if dist.is_main:
        claim_run_dir(run_dir, job.resume, job.overwrite)
    resume_from = find_resume_checkpoint(job.resume, run_dir, dist)
    if job.resume == "auto" and resume_from is None and dist.is_main and not results_in(run_dir):
        log.warning("resume=auto: %s holds no run to continue, so this run starts fresh (a first start, or a "
                    "mistyped directory?)", run_dir)
    if mode in ("lr_find", "doctor") and dist.is_main:  # training says it from its console sink
        log.info("run dir: %s", shown_path(run_dir))
    if mode == "lr_find":
        from harness.modes.lr_find import run_lr_find

        return run_lr_find(config, run_dir, device)
    if mode == "doctor":
        from harness.modes.doctor import run_doctor

        return run_doctor(config, run_dir, device)
    remedies = config.diagnose.remedy == "auto"
    if not remedies and job.resume == "auto" and resume_from is not None and \
            resume_from[1]["step"] >= config.trainer.max_steps:
        return already_complete(config.trainer.max_steps, run_dir, resume_from[1]["step"], dist)
    # a sharded model needs a process group even in one process (a mesh of one rank)
    init_process_group(dist, device, single=is_sharded(config.parallel))
    try:
        if remedies:
            return run_attempts(config, run_dir, lambda attempt, attempt_dir: _attempt(attempt, attempt_dir, dist), dist)
        objective = _train(config, run_dir, device, dist, resume_from)
        barrier(dist)  # rank 0 may still be writing summary.json and the report
        return objective
    finally:
        destroy_process_group()


def _attempt(config: RunConfig, run_dir: Path, dist: DistInfo) -> Any:
    """One attempt of diagnose.remedy=auto: an ordinary run in its own dir (its config was derived
    and checked by `RunConfig.with_overrides`, as any changed config is)."""
    device = rank_device(config.device, dist, config.run.device)
    resume_from = find_resume_checkpoint(config.job.resume, run_dir, dist)
    if resume_from is not None and resume_from[1]["step"] >= config.trainer.max_steps:
        return already_complete(config.trainer.max_steps, run_dir, resume_from[1]["step"], dist)
    return _train(config, run_dir, device, dist, resume_from)


def rank_device(device: torch.device, dist: DistInfo, configured: str) -> torch.device:
    """Under torchrun each rank takes the GPU of its local rank, so a node needs a GPU per process:
    with fewer, every rank refuses before any of them waits on another (the surplus ranks would
    fail on an invalid device ordinal, the rest hang in the first collective)."""
    if not (dist.enabled and device.type == "cuda"):
        return device
    processes, gpus = int(os.environ.get("LOCAL_WORLD_SIZE", dist.local_rank + 1)), torch.cuda.device_count()
    if processes > gpus:
        raise ConfigError("device", configured, f"cpu, or at most {gpus} process(es) per node: each of this node's "
                                                f"{processes} processes needs a CUDA device of its own and it has {gpus}")
    return torch.device("cuda", dist.local_rank)


def already_complete(max_steps: int, run_dir: Path, step: int, dist: DistInfo) -> Any:
    """resume=auto on a run that reached trainer.max_steps trains nothing and leaves the run
    untouched: one line, exit 0, and its objective (for a sweep that is run again)."""
    if dist.is_main:
        print(f"{run_dir} is complete (step {step} of trainer.max_steps={max_steps}); nothing was changed. To "
              f"train it further, start a new run from its weights under a schedule of its own: init=checkpoint "
              f"init.path={run_dir} hydra.run.dir=NEW_DIR trainer.max_steps=N; or resume=auto "
              f"trainer.max_steps=N (N > {step}) where its schedule allows (constant; wsd before its decay)",
              flush=True)
    return stored_objective(run_dir)


def write_diagnosis(run_dir: Path, announced: set[str] = frozenset()) -> None:
    """The post-run report: findings now, plots by a background process (off a sweep trial's
    critical path). A failure to diagnose must not cost the user a finished run. The console gets
    one line per finding not `announced` live already; report.md has the evidence and the fix."""
    try:
        from harness.diagnosis import write_report
        from harness.diagnosis.draw import draw_in_background

        findings = write_report(run_dir, plots=False)
        draw_in_background(run_dir)
    except Exception as err:  # noqa: BLE001 - the run itself is complete and saved
        log.warning("diagnosis failed (%s: %s); the run is complete", type(err).__name__, err)
        return
    for finding in findings:
        if finding.name not in announced:
            log.warning("diagnosis: %s", finding.headline())
    log.info("diagnosis report: %s (plots follow in a few seconds)", run_dir / "report.md")


def _record_failed_write(trainer: Trainer, err: WriteError, wall_time: float, objective: tuple[str, ...],
                         run_dir: Path) -> None:
    """summary.json with status `failed` and the error, if the disk still takes it."""
    summary = {**summarize(trainer, "failed", wall_time, objective), "error": str(err)}
    try:
        atomic_json_dump(summary, run_dir / "summary.json")
    except WriteError:
        log.warning("summary.json was not written either: the disk is still full")


def _train(config: RunConfig, run_dir: Path, device: torch.device, dist: DistInfo,
           resume_from: tuple[Path, dict[str, Any]] | None) -> Any:
    started = time.perf_counter()
    trainer = assemble(config, run_dir, device, resume_from, dist).trainer
    accept_command()
    try:
        status = trainer.fit()
    except BaseException as err:
        if trainer.tracker:  # the trackers file the run as failed; its checkpoints stay valid
            trainer.tracker.finish({"status": "failed"})
        if isinstance(err, WriteError) and dist.is_main:
            _record_failed_write(trainer, err, time.perf_counter() - started, config.job.objective, run_dir)
        raise
    finally:
        trainer.close()
    summary = summarize(trainer, status, time.perf_counter() - started, config.job.objective)
    if dist.is_main:
        atomic_json_dump(summary, run_dir / "summary.json")
        best = summary["best_val_loss"]
        log.info("%s after %d steps: best val loss %s -> %s", status, summary["steps"],
                 "none" if best is None else f"{best:.4f}", run_dir / "summary.json")
        if config.diagnose.report:
            write_diagnosis(run_dir, {e.get("finding") for e in summary["events"] if e["kind"] == "diagnosis"})
    if trainer.tracker:
        trainer.tracker.finish(summary)  # after summary.json and report.md exist: trackers keep them
    return sweep_value(summary["objective"])
