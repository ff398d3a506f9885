"""Run the fake app's sweeps as a user would (a `-m` command in a subprocess) and read back
the study they leave in the sweep dir."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[2]
APPS = Path(__file__).resolve().parent
FAKE_APP = APPS / "fake_app.py"

optuna.logging.set_verbosity(optuna.logging.WARNING)


def sweep_env() -> dict[str, str]:
    """The repo on the path: the project need not be pip-installed for its plugin to be found."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def sweep_command(sweep_dir: Path, *overrides: str) -> list[str]:
    """Plots and TensorBoard off: they cost seconds and have a test of their own."""
    return [
        sys.executable, str(FAKE_APP), "-m", "hydra/sweeper=optuna", f"hydra.sweep.dir={sweep_dir}",
        "hydra.sweeper.plots=false", "hydra.sweeper.tensorboard=false", *overrides,
    ]


def run_sweep(sweep_dir: Path, *overrides: str, expect_rc: int = 0) -> subprocess.CompletedProcess:
    proc = subprocess.run(sweep_command(sweep_dir, *overrides), env=sweep_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == expect_rc, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def start_sweep(sweep_dir: Path, *overrides: str) -> subprocess.Popen:
    return subprocess.Popen(sweep_command(sweep_dir, *overrides), env=sweep_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def load_study(sweep_dir: Path) -> optuna.Study:
    """The one study in the sweep dir's default storage."""
    storage = f"sqlite:///{sweep_dir / 'optuna.db'}"
    (name,) = optuna.get_all_study_names(storage)
    return optuna.load_study(study_name=name, storage=storage)


def held(sweep_dir: Path, n: int) -> bool:
    """Trial 0 has finished and `n` others are running (their log exists, their summary not yet):
    with the fake app's gate closed for trials >= 1, they stay so until the gate opens."""
    logs = {p.parent.name for p in sweep_dir.glob("*/trial.log")}
    done = {p.parent.name for p in sweep_dir.glob("*/summary.json")}
    return "0" in done and len(logs - done) >= n
