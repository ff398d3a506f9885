"""The same Optuna sweep run locally and as SLURM jobs (`hydra/launcher=slurm`): trials per minute.

What a trial pays for being a job is the queue: submission, the scheduler's cycle, a fresh
Python in the allocation, and the sweeper's polling. This runs one sweep of short trials both
ways on this machine (the SLURM side needs a cluster: scripts/slurm_local_cluster.sh starts a
one-node one as root), interleaved round by round, and prints each one's median wall time,
trials per minute and the ratio.

    python -m bench.slurm_sweep                 # 6 trials x 2 at once, 2 rounds
    python -m bench.slurm_sweep --trials 8 --steps 2000 --rounds 3
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.startup import wall

ROOT = Path(__file__).resolve().parent.parent


def sweep_command(sweep_dir: Path, launcher: list[str], trials: int, parallel: int, steps: int) -> list[str]:
    return [sys.executable, "train.py", "-m", "hydra/sweeper=optuna", *launcher,
            f"hydra.sweeper.n_trials={trials}", f"hydra.sweeper.n_jobs={parallel}", "optim.lr=interval(1e-3,1e-2)",
            "model=mlp", "data=synthetic", "logger=none", "diagnose=false", f"trainer.max_steps={steps}",
            f"trainer.eval_every={steps}", f"hydra.sweep.dir={sweep_dir}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--parallel", type=int, default=2, help="trials at once, both ways")
    parser.add_argument("--steps", type=int, default=300, help="training steps per trial")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--partition", default="debug")
    args = parser.parse_args()
    if subprocess.run(["sinfo", "-h"], capture_output=True).returncode != 0:
        sys.exit("no SLURM cluster answers (sinfo failed): as root, scripts/slurm_local_cluster.sh starts one")
    ways = {
        "local": [],
        "slurm": ["hydra/launcher=slurm", f"hydra.launcher.partition={args.partition}",
                  f"hydra.launcher.cpus_per_task={max(1, 2 // args.parallel)}"],
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for name, launcher in ways.items():
                sweep_dir = Path(tmp) / f"{name}-{round_}"
                times[name].append(wall(sweep_command(sweep_dir, launcher, args.trials, args.parallel, args.steps)))
    print(f"{args.trials} trials of {args.steps} steps (mlp, synthetic), {args.parallel} at once; "
          f"median of {args.rounds} rounds")
    print(f"{'way':<8}{'wall s':>10}{'trials/min':>12}")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{name:<8}{median:>10.1f}{args.trials / median * 60:>12.1f}")
    ratio = statistics.median(times["slurm"]) / statistics.median(times["local"])
    print(f"slurm / local wall time: {ratio:.2f}x")


if __name__ == "__main__":
    main()
