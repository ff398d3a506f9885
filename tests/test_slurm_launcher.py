"""`hydra/launcher=slurm` against a real one-node SLURM cluster (../shared/slurm starts one): each
trial is its own job, a job preempted before its time limit is submitted again and resumes
exactly, and a launcher our sweeper cannot drive is refused instead of ignored."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT, one_line_error, run_cli

CLUSTER_SCRIPT = ROOT.parent / "shared" / "slurm" / "local-cluster.sh"
TRIAL = ["model=mlp", "data=synthetic", "logger=none", "diagnose=false", "trainer.eval_every=500"]
SLURM = ["hydra/sweeper=optuna", "hydra/launcher=slurm", "hydra.launcher.partition=debug"]


def _cluster_answers() -> bool:
    if shutil.which("sinfo") is None:
        return False
    out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=30)
    return out.returncode == 0 and any(state in out.stdout for state in ("idle", "mix", "alloc"))


@pytest.fixture(scope="module")
def slurm():
    pytest.importorskip("submitit", reason="the slurm extra is not installed")
    if not _cluster_answers():
        if os.geteuid() != 0 or not CLUSTER_SCRIPT.is_file():
            pytest.skip("no SLURM cluster, and this user cannot start ../shared/slurm's")
        started = subprocess.run(["bash", str(CLUSTER_SCRIPT)], capture_output=True, text=True, timeout=900)
        if started.returncode != 0 or not _cluster_answers():
            pytest.skip(f"../shared/slurm could not start a cluster: {started.stderr[-300:]}")
    yield


def _jobs(trial_dir: Path) -> list[str]:
    return [line.split()[0] for line in (trial_dir / "slurm_jobs.txt").read_text().splitlines()]


def test_each_trial_is_its_own_slurm_job(slurm, tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(["-m", *SLURM, "hydra.sweeper.n_trials=3", "hydra.sweeper.n_jobs=2",
                      "optim.lr=interval(1e-3,1e-2)", *TRIAL, "trainer.max_steps=20", f"hydra.sweep.dir={sweep}"],
                     cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = {n: _jobs(sweep / str(n)) for n in range(3)}
    assert all(len(ids) == 1 for ids in jobs.values()) and len({ids[0] for ids in jobs.values()}) == 3
    log = result.stdout + result.stderr
    assert all(f"trial {n}: SLURM job {ids[0]}, log " in log for n, ids in jobs.items())
    assert all(json.loads((sweep / str(n) / "summary.json").read_text())["status"] == "completed" for n in range(3))


def test_a_job_signalled_before_its_limit_resumes_as_the_same_trial_and_ends_with_the_same_weights(slurm, tmp_path):
    steps = ["model.width=256", "trainer.max_steps=3000", "trainer.ckpt_every=200", "trainer.log_every=50",
             "trainer.eval_every=1000"]
    sweep = tmp_path / "sweep"
    command = ["-m", *SLURM, "hydra.sweeper.n_trials=1", "optim.lr=choice(0.003)", *TRIAL, *steps,
               f"hydra.sweep.dir={sweep}"]
    sweeper = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *command], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = sweep / "0" / "train.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (log.is_file() and "step 500/3000" in log.read_text()):
        time.sleep(0.5)
    (first,) = _jobs(sweep / "0")
    subprocess.run(["scancel", "-s", "USR2", first], check=True)  # what SLURM sends signal_delay_s before the limit
    output, _ = sweeper.communicate(timeout=300)
    assert sweeper.returncode == 0, output[-3000:]
    jobs = _jobs(sweep / "0")
    assert len(jobs) == 2 and "submitted again with resume=auto" in output
    summary = json.loads((sweep / "0" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 3000
    straight = run_cli([*TRIAL, *steps, "optim.lr=0.003", f"hydra.run.dir={tmp_path / 'straight'}"], cwd=tmp_path)
    assert straight.returncode == 0, straight.stderr[-2000:]
    final = [torch.load(d / "checkpoints" / "step_00003000.pt", weights_only=False)["model"]
             for d in (sweep / "0", tmp_path / "straight")]
    assert all(torch.equal(v, final[1][k]) for k, v in final[0].items())


FAKE_LAUNCHER = '''
from dataclasses import dataclass
from hydra.core.config_store import ConfigStore
from hydra.plugins.launcher import Launcher


class FakeLauncher(Launcher):
    def __init__(self, **kwargs):
        pass

    def setup(self, *, hydra_context, task_function, config):
        pass

    def launch(self, job_overrides, initial_job_idx):
        raise RuntimeError("a launcher that only knows batches")


@dataclass
class FakeConf:
    _target_: str = "hydra_plugins.fake_batch_launcher.FakeLauncher"


ConfigStore.instance().store(group="hydra/launcher", name="fake_batch", node=FakeConf)
'''


def test_a_launcher_the_sweeper_cannot_drive_is_refused_and_leaves_nothing(tmp_path):
    plugin = tmp_path / "plugins" / "hydra_plugins" / "fake_batch_launcher"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(FAKE_LAUNCHER)
    sweep = tmp_path / "sweep"
    result = run_cli(["-m", "hydra/sweeper=optuna", "hydra/launcher=fake_batch", "hydra.sweeper.n_trials=2",
                      "optim.lr=interval(1e-3,1e-2)", *TRIAL, "trainer.max_steps=5", f"hydra.sweep.dir={sweep}"],
                     cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "plugins")})
    line = one_line_error(result, "hydra/launcher")
    assert "FakeLauncher" in line and "cannot drive this launcher" in line
    assert not (sweep / "optuna.db").exists() and not (sweep / "0").exists()


def test_a_trial_with_several_processes_runs_torchrun_meeting_at_the_first_node():
    from hydra_plugins.harness_optuna_sweeper.runner import AppCommand, TrialSpec
    from hydra_plugins.harness_slurm_launcher.runner import SlurmTrialRunner

    app = AppCommand("python", ("train.py",), (), "/work")
    spec = TrialSpec(3, Path("/sweep/3"), ("optim.lr=0.01",), {"HARNESS_OPTUNA_TRIAL_ID": "4"}, 0, 2)
    one = SlurmTrialRunner({"nodes": 1, "tasks_per_node": 1}).command(app, spec)
    assert one[:3] == ["env", "HARNESS_OPTUNA_TRIAL_ID=4", "PYTHONUNBUFFERED=1"] and one[3:5] == ["python", "train.py"]
    many = SlurmTrialRunner({"nodes": 2, "tasks_per_node": 4}).command(app, spec)
    assert many[-3:-1] == ["bash", "-c"]
    script = many[-1]
    assert script.startswith('MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1); exec python -m '
                             'torch.distributed.run --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d '
                             '--rdzv_endpoint=$MASTER:29500 --rdzv_id=$SLURM_JOB_ID train.py optim.lr=0.01')
    assert "hydra.run.dir='/sweep/3'" in shlex.split(script.split("; exec ", 1)[1])  # quoted for the shell


def test_stopping_the_sweeper_cancels_its_jobs(slurm, tmp_path):
    sweep = tmp_path / "sweep"
    command = ["-m", *SLURM, "hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=2", "optim.lr=interval(1e-3,1e-2)",
               *TRIAL, "model.width=256", "trainer.max_steps=100000", f"hydra.sweep.dir={sweep}"]
    sweeper = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *command], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all((sweep / str(n) / "train.log").is_file() for n in range(2)):
        time.sleep(0.5)
    jobs = [job for n in range(2) for job in _jobs(sweep / str(n))]
    sweeper.send_signal(signal.SIGINT)  # Ctrl-C
    output, _ = sweeper.communicate(timeout=120)
    deadline, listed = time.monotonic() + 60, set(jobs)
    while time.monotonic() < deadline and set(jobs) & listed:  # cancelled jobs take a moment to leave squeue
        time.sleep(1)
        listed = set(subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split())
    assert jobs and not set(jobs) & listed, output[-2000:]
    assert not (sweep / "2").exists()  # nothing new was queued after the stop


def test_the_slurm_launcher_under_hydras_basic_sweeper_is_refused_and_leaves_nothing(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(["-m", "hydra/launcher=slurm", "optim.lr=1e-3,2e-3", *TRIAL, "debug=smoke",
                      f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    line = one_line_error(result, "hydra/launcher")
    assert "used with hydra/sweeper=optuna" in line and not sweep.exists()
