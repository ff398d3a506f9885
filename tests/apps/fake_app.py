"""A stand-in for train.py that keeps its contract with the sweeper and runs in well under 1 s.

It writes summary.json into its Hydra run dir like the real app, reports intermediate values
through harness.loop.callbacks.sweep_trial.TrialReporter when `evals` > 0, and can be told to misbehave (`mode`).
`mode=eval` in a trial's run dir stands in for train.py's: eval.json with a test loss derived
from that trial's summary. It also records when it ran, so tests can check that trials overlapped, and can hold trials until
a test opens a gate (a file), so a test stops a sweep mid-run by an event, not by a sleep.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf


def loss_of(cfg: DictConfig) -> float:
    """Smooth, known optimum: x=0.3, n=2, adamw, lr=1e-3, small clip."""
    return ((cfg.x - 0.3) ** 2 + 0.01 * (cfg.n - 2) ** 2 + (0.1 if cfg.optim.name == "sgd" else 0.0)
            + 0.05 * abs(math.log10(cfg.optim.lr) + 3) + 0.01 * cfg.clip)


def write_summary(run_dir: Path, summary: dict) -> None:
    tmp = run_dir / ".summary.json.tmp"
    tmp.write_text(json.dumps(summary))
    os.replace(tmp, run_dir / "summary.json")


@hydra.main(version_base="1.3", config_path="conf", config_name="fake")
def main(cfg: DictConfig) -> float:
    started = time.time()
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    if cfg.mode == "eval":
        trained = json.loads((run_dir / "summary.json").read_text())
        (run_dir / "eval.json").write_text(json.dumps({"checkpoint": str(run_dir / "best.pt"), "step": trained["steps"],
                                                       "test_samples": trained["test_samples"],
                                                       "test_loss": trained["final_val_loss"] + 1.0}))
        return trained["final_val_loss"]
    if cfg.mode == "crash":
        raise RuntimeError("simulated crash")
    if cfg.mode == "hang":
        time.sleep(60)
    loss = loss_of(cfg)
    status, reason, steps = "completed", None, 0
    reporter = None
    if cfg.evals > 0:
        from harness.loop.callbacks.sweep_trial import TrialReporter

        reporter = TrialReporter.from_env()
    for k in range(1, cfg.evals + 1):
        time.sleep(cfg.sleep_s / cfg.evals)
        steps = 10 * k
        value = loss * (1 + 1 / k)  # improves with training, ranking stays the same
        if reporter is not None:
            reporter.report(value, steps)
            if reporter.should_prune():
                status, reason = "pruned", f"pruned at step {steps}"
                break
    if cfg.evals == 0:
        time.sleep(cfg.sleep_s)
    job_num = OmegaConf.select(HydraConfig.get(), "job.num", throw_on_missing=False)
    if cfg.gate is not None and (job_num or 0) >= cfg.gated_from:
        while not Path(cfg.gate).exists():
            time.sleep(0.05)
    if cfg.mode == "diverge":
        status, reason, loss = "diverged", "loss became NaN at step 3", float("nan")
    if cfg.mode == "nan_loss":
        loss = float("nan")
    ended = time.time()
    metrics = {"loss": loss, "time": ended - started}
    names = OmegaConf.to_container(cfg.objective) if OmegaConf.is_list(cfg.objective) else [cfg.objective]
    values = [metrics[n] for n in names]
    write_summary(run_dir, {
        "status": status,
        "objective": values if len(values) > 1 else values[0],
        "best_val_loss": None if status == "diverged" else loss,
        "final_val_loss": loss,
        "steps": steps,
        "wall_time_s": ended - started,
        "skipped_steps": 0,
        "reason": reason,
        "started_at": started,
        "ended_at": ended,
        "env": {k: os.environ.get(k) for k in ("FAKE_SLOT", "FAKE_WRAPPED", "OMP_NUM_THREADS")},
        "job_num": job_num,
        "test_samples": cfg.test_samples,
    })
    return loss


if __name__ == "__main__":
    main()
