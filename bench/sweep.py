"""How busy does the sweeper keep its n_jobs slots? Runs a sweep of the test suite's fake app
(no torch; each trial sleeps for a sampled duration) and prints

    slot utilisation = busy slot-seconds / (n_jobs x sweep wall time)

where a slot is busy from the spawn of a trial process to its exit (start-up included) and
the wall time runs from the first trial's start to the last trial's end. For comparison it
replays the same trial durations through batch-blocking scheduling (Hydra's Launcher.launch:
n_jobs trials at a time, the next batch after the slowest one ends).

    python -m bench.sweep [--trials 24] [--jobs 2] [--min-s 0.3] [--max-s 2.0]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FAKE_APP = REPO / "tests" / "apps" / "fake_app.py"


def run_sweep(sweep_dir: Path, args: argparse.Namespace) -> float:
    cmd = [
        sys.executable, str(FAKE_APP), "-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=random",
        f"hydra.sweeper.n_trials={args.trials}", f"hydra.sweeper.n_jobs={args.jobs}",
        f"hydra.sweeper.seed={args.seed}", "hydra.sweeper.plots=false",
        "hydra.sweeper.tensorboard=false", f"hydra.sweep.dir={sweep_dir}",
        f"sleep_s=interval({args.min_s},{args.max_s})",
    ]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}  # the plugin is found without a pip install
    started = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def trial_spans(sweep_dir: Path) -> list[tuple[int, float, float]]:
    """(slot, start, end) of every trial process, in start order."""
    import optuna

    from hydra_plugins.harness_optuna_sweeper._ledger import ATTR_PROCESS
    from hydra_plugins.harness_optuna_sweeper._study import STORAGE_FILE

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{sweep_dir / STORAGE_FILE}"
    (name,) = optuna.get_all_study_names(storage)
    trials = optuna.load_study(study_name=name, storage=storage).get_trials(deepcopy=False)
    processes = [t.user_attrs[ATTR_PROCESS] for t in trials]
    return sorted(((p["slot"], p["started_at"], p["ended_at"]) for p in processes),
                  key=lambda span: span[1])


def idle_between_trials(spans: list[tuple[int, float, float]]) -> list[float]:
    """Per slot: from a trial's exit to the spawn of the next trial in that slot."""
    last_end: dict[int, float] = {}
    gaps = []
    for slot, start, end in spans:
        if slot in last_end:
            gaps.append(start - last_end[slot])
        last_end[slot] = end
    return gaps


def batch_blocking_wall(durations: list[float], n_jobs: int) -> float:
    batches = [durations[i:i + n_jobs] for i in range(0, len(durations), n_jobs)]
    return sum(max(batch) for batch in batches)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--min-s", type=float, default=0.3, help="shortest simulated training time")
    parser.add_argument("--max-s", type=float, default=2.0, help="longest simulated training time")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        command_s = run_sweep(Path(tmp), args)
        spans = trial_spans(Path(tmp))
    durations = [end - start for _, start, end in spans]
    busy = sum(durations)
    first, last = min(start for _, start, _ in spans), max(end for _, _, end in spans)
    wall = last - first
    blocking = batch_blocking_wall(durations, args.jobs)
    gaps = idle_between_trials(spans)
    print(f"{len(spans)} trials, n_jobs={args.jobs}, trial process lifetimes "
          f"{min(durations):.2f}-{max(durations):.2f} s (mean {busy / len(durations):.2f} s); "
          f"whole command {command_s:.1f} s")
    print(f"slot idle between trials: mean {1000 * sum(gaps) / len(gaps):.0f} ms, "
          f"max {1000 * max(gaps):.0f} ms")
    print(f"continuous (this sweeper):  {busy:.1f} slot-s / ({args.jobs} x {wall:.2f} s) "
          f"= {busy / (args.jobs * wall):.3f}")
    print(f"batch-blocking, same trials: {busy:.1f} slot-s / ({args.jobs} x {blocking:.2f} s) "
          f"= {busy / (args.jobs * blocking):.3f}")


if __name__ == "__main__":
    main()
