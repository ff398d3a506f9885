"""`python train.py ...` as the benchmarks run it: a process of its own at one thread (they run
several side by side on few cores), with the repository root on PYTHONPATH so that the user-written
models and data they name by `_target_` (bench.ports.*, bench.suite_models.*) import."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_train(overrides: tuple[str, ...], run_dir: Path, timeout: float) -> dict:
    """{"error": None, or why it failed (the exit code and stderr's last line, or the timeout),
    "seconds": its wall time}; the run itself is in `run_dir`."""
    cmd = [sys.executable, str(ROOT / "train.py"), *overrides, f"hydra.run.dir={run_dir}", "overwrite=true"]
    paths = [str(ROOT), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
        last_line = (proc.stderr.strip().splitlines() or [""])[-1][:300]
        error = f"exit {proc.returncode}: {last_line}" if proc.returncode else None
    except subprocess.TimeoutExpired:
        error = f"timed out after {timeout:g} s"
    return {"error": error, "seconds": round(time.monotonic() - started, 1)}
