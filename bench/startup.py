"""A run's fixed cost: `train.py debug=smoke trainer.max_steps=1` against a bare `import torch` + AdamW.

Short sweep trials are mostly start-up, so this is the number that decides how much of a sweep's
time trains. Both commands run as fresh processes, interleaved round by round so machine noise hits
both alike; the table gives each one's median process wall time and the overhead of the harness.

    python -m bench.startup              # 5 rounds
    python -m bench.startup --rounds 9
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.diagnosis.report import PLOTS_PENDING, REPORT_FILE

ROOT = Path(__file__).resolve().parent.parent

TARGET_OVERHEAD_S = 0.5
BARE_CODE = "import torch; torch.optim.AdamW(torch.nn.Linear(8, 8).parameters())"
BARE = [sys.executable, "-c", BARE_CODE]
# train.py ends a finished run with os._exit (no interpreter teardown); the same for the bare
# command shows how much of the difference is that, and how much is the harness's own work
BARE_NO_TEARDOWN = [sys.executable, "-c", BARE_CODE + "; import os; os._exit(0)"]


def wait_for_plots(run_dir: Path, timeout: float = 120.0) -> None:
    """The run's plots are drawn by a background process after it exits: let it finish before the
    next measurement, so it does not slow that one down (its time is not counted)."""
    deadline = time.monotonic() + timeout
    while PLOTS_PENDING in (run_dir / REPORT_FILE).read_text() and time.monotonic() < deadline:
        time.sleep(0.2)


def harness_command(run_dir: Path) -> list[str]:
    return [sys.executable, "train.py", "debug=smoke", "trainer.max_steps=1", f"hydra.run.dir={run_dir}"]


def wall(command: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"import torch + AdamW": [], "import torch + AdamW, no teardown": [],
                                     "train.py debug=smoke trainer.max_steps=1": []}
    with tempfile.TemporaryDirectory() as tmp:
        wall(harness_command(Path(tmp) / "warm"))  # fills the data cache and the OS file cache once
        wait_for_plots(Path(tmp) / "warm")
        for i in range(args.rounds):
            bare, bare_no_teardown, harness = times.values()
            bare.append(wall(BARE))
            bare_no_teardown.append(wall(BARE_NO_TEARDOWN))
            harness.append(wall(harness_command(Path(tmp) / f"run{i}")))
            wait_for_plots(Path(tmp) / f"run{i}")
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"| command | median wall (s), {args.rounds} rounds |\n|---|---|")
    for name, value in medians.items():
        print(f"| `{name}` | {value:.2f} |")
    bare, bare_no_teardown, harness = medians.values()
    verdict = "met" if harness - bare <= TARGET_OVERHEAD_S else "NOT met"
    print(f"\noverhead: {harness - bare:.2f} s over the bare command (target <= {TARGET_OVERHEAD_S} s: {verdict}); "
          f"{harness - bare_no_teardown:.2f} s over the bare command without its teardown")


if __name__ == "__main__":
    main()
