"""How DataLoader workers start under DDP (`data.worker_start`): hangs and wall time per start method.

A two-rank torchrun job (gloo on CPU) trains on a user Dataset read by 2 workers per rank, the
case where a forked worker was seen stuck right after fork (a lock inherited from one of the
process group's threads). Each method runs the same job in interleaved rounds, `--parallel` jobs
at a time to load the machine as a test suite does; a job still running after `--timeout`
seconds counts as a hang and is killed. The table gives hangs and the median job wall time.

    python -m bench.worker_start                                   # auto, fork, forkserver, spawn; 8 rounds
    python -m bench.worker_start --methods auto --rounds 30        # auto alone, 30 jobs
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
from torch.utils.data import Dataset

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("auto", "fork", "forkserver", "spawn")


class Points(Dataset):
    """Two Gaussian blobs in 16 dimensions, one sample at a time (a typical map-style user Dataset)."""

    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.y = torch.randint(0, 2, (n,), generator=g)
        self.x = torch.randn(n, 16, generator=g) + 2.0 * self.y[:, None].float()

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


def points() -> tuple[Dataset, Dataset]:
    return Points(2048, 0), Points(512, 1)


def job(method: str, run_dir: Path) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            str(ROOT / "train.py"), "data=custom", "data._target_=bench.worker_start.points", "data.task=classification",
            "data.num_classes=2", "model=mlp", "model.width=32", "batch_size=64", "data.num_workers=2",
            f"data.worker_start={method}", "trainer.max_steps=30", "trainer.eval_every=10", "trainer.log_every=10",
            "trainer.ckpt_every=30", "logger=none", "diagnose=false", f"hydra.run.dir={run_dir}"]


def run_job(method: str, run_dir: Path, timeout: float) -> float | None:
    """The job's wall time in seconds, or None when it hung (killed after `timeout`)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    proc = subprocess.Popen(job(method, run_dir), cwd=run_dir.parent, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return None
    if proc.returncode != 0:
        sys.exit(f"{method}: the job failed (exit {proc.returncode}):\n{err[-2000:]}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--parallel", type=int, default=2, help="jobs at once (load, as in a test suite)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds after which a job counts as hung")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {m: [] for m in args.methods}
    hangs = {m: 0 for m in args.methods}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.parallel) as pool:
        jobs = [(m, Path(tmp) / f"{m}_{r}") for r in range(args.rounds) for m in args.methods]  # interleaved
        for (method, _), wall in zip(jobs, pool.map(lambda j: run_job(*j, args.timeout), jobs)):
            if wall is None:
                hangs[method] += 1
            else:
                walls[method].append(wall)
    fork = statistics.median(walls["fork"]) if walls.get("fork") else None
    print("| start method | jobs | hangs | median wall (s) | vs fork |\n|---|---|---|---|---|")
    for method in args.methods:
        median = statistics.median(walls[method]) if walls[method] else float("nan")
        ratio = f"{median / fork:.2f}" if fork else "-"
        print(f"| {method} | {args.rounds} | {hangs[method]} | {median:.2f} | {ratio} |")
    print(f"\n{args.parallel} jobs at a time on {os.cpu_count()} CPUs; a job over {args.timeout:.0f} s counts as hung")


if __name__ == "__main__":
    main()
