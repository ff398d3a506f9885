"""Draw a finished run's plots in a process of their own, so the run that spawned it can exit.

A short sweep trial would otherwise spend most of its life importing matplotlib and rendering
PNGs nobody waits for; the training process writes report.md with the findings first, then
starts `python -m harness.diagnosis.draw RUN_DIR` at low priority and returns.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.diagnosis.report import write_report

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def draw_in_background(run_dir: Path) -> subprocess.Popen:
    """Start the drawing process, detached from this one's session (a Ctrl-C after the run ends
    does not kill it half-way), and return without waiting."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "harness.diagnosis.draw", str(run_dir)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def main(run_dir: str) -> None:
    os.nice(10)  # after the run: let whatever starts next (a sweep's next trial) have the cores
    write_report(Path(run_dir), plots=True)


if __name__ == "__main__":
    main(sys.argv[1])
