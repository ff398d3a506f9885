"""`hydra/launcher=slurm` against a real one-node SLURM cluster (scripts/slurm_local_cluster.sh): each
trial is its own job, at most `max_parallel` at once; a job warned before its time limit is
requeued and resumes exactly; Ctrl-C cancels the jobs; a rerun after a killed sweeper waits for
them; a single run is one job; a two-process trial runs torchrun in its job; a launcher our
sweeper cannot drive is refused instead of ignored."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from conftest import EVENT_TIMEOUT_S, ROOT, one_line_error, run_cli, wait_until

CLUSTER_SCRIPT = ROOT / "scripts" / "slurm_local_cluster.sh"
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
            pytest.skip("no SLURM cluster, and only root can start scripts/slurm_local_cluster.sh's")
        started = subprocess.run(["bash", str(CLUSTER_SCRIPT)], capture_output=True, text=True, timeout=900)
        if started.returncode != 0 or not _cluster_answers():
            pytest.skip(f"scripts/slurm_local_cluster.sh could not start a cluster: {started.stderr[-300:]}")
    yield


def _jobs(trial_dir: Path) -> list[str]:
    return [line.split()[0] for line in (trial_dir / "slurm_jobs.txt").read_text().splitlines()]


def _queued() -> set[str]:
    return set(subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True).stdout.split())


def _log_has(path: Path, text: str) -> Callable[[], bool]:
    return lambda: path.is_file() and text in path.read_text()


@pytest.fixture
def cleanup(tmp_path) -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts go in this list; however the test ends, they and every SLURM job
    submitted under tmp_path are stopped, so a failed test leaves no sweeper submitting trials and
    no job holding the cluster's cores for the tests after it."""
    started: list[subprocess.Popen] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # each runs in a session of its own
            proc.wait()
    listed = {job for f in tmp_path.rglob("slurm_jobs.txt") for job in _jobs(f.parent)}
    listed |= {m.group(1) for f in tmp_path.rglob(".submitit/*") if (m := re.match(r"(\d+)_", f.name))}
    if listed:
        subprocess.run(["scancel", *sorted(listed)], capture_output=True)


def _start(cleanup: list[subprocess.Popen], args: list[str], cwd: Path, **popen) -> subprocess.Popen:
    """`python train.py ARGS` in a session of its own, stopped by `cleanup` if still running."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=cwd, start_new_session=True,
                            **popen)
    cleanup.append(proc)
    return proc


def _start_when_requeued(job: str) -> None:
    """SLURM holds a requeued job back for a while before it may start again; a test has no
    minutes to spare."""
    deadline = time.monotonic() + EVENT_TIMEOUT_S
    while time.monotonic() < deadline:
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
        if state == "PENDING":
            subprocess.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], check=True)
            return
        time.sleep(0.2)
    raise AssertionError(f"job {job} was not requeued")


def _study(sweep: Path):
    import optuna

    return optuna.load_study(study_name=None, storage=f"sqlite:///{sweep / 'optuna.db'}")


@pytest.mark.slow  # ~35 s; a sweep's jobs (and their cancellation) and a single run's job stay in the default suite
def test_each_trial_is_its_own_slurm_job_and_max_parallel_caps_the_jobs_in_flight(slurm, tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(["-m", *SLURM, "hydra.launcher.max_parallel=2", "hydra.sweeper.n_trials=4",
                      "hydra.sweeper.n_jobs=4", "optim.lr=interval(1e-3,1e-2)", *TRIAL, "trainer.max_steps=20",
                      f"hydra.sweep.dir={sweep}"], cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = {n: _jobs(sweep / str(n)) for n in range(4)}
    assert all(len(ids) == 1 for ids in jobs.values()) and len({ids[0] for ids in jobs.values()}) == 4
    log = result.stdout + result.stderr
    assert all(f"trial {n}: SLURM job {ids[0]}, log " in log for n, ids in jobs.items())
    for n, (job,) in jobs.items():  # the trial itself ran inside that job
        assert f"running as SLURM job {job} on " in (sweep / str(n) / "train.log").read_text()
        assert json.loads((sweep / str(n) / "summary.json").read_text())["status"] == "completed"
    spans = [t.user_attrs["process"] for t in _study(sweep).trials]
    assert len(spans) == 4 and {span["slot"] for span in spans} == {0, 1}
    in_flight = max(sum(s["started_at"] <= span["started_at"] < s["ended_at"] for s in spans) for span in spans)
    assert in_flight == 2


@pytest.mark.slow  # ~37 s; by default SIGTERM (SIGUSR1's handler) checkpoints and resumes exactly under torchrun
def test_a_job_signalled_before_its_limit_is_requeued_as_the_same_trial_and_ends_with_the_same_weights(slurm, tmp_path,
                                                                                                      cleanup):
    steps = ["model.width=256", "trainer.max_steps=3000", "trainer.ckpt_every=200", "trainer.log_every=50",
             "trainer.eval_every=1000"]
    sweep = tmp_path / "sweep"
    command = ["-m", *SLURM, "hydra.sweeper.n_trials=1", "optim.lr=choice(0.003)", *TRIAL, *steps,
               f"hydra.sweep.dir={sweep}"]
    sweeper = _start(cleanup, command, tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = sweep / "0" / "train.log"
    wait_until(_log_has(log, "step 500/3000"), "the trial's step 500")
    (first,) = _jobs(sweep / "0")
    subprocess.run(["scancel", "-s", "USR2", first], check=True)  # what SLURM sends signal_delay_s before the limit
    _start_when_requeued(first)
    output, _ = sweeper.communicate(timeout=2 * EVENT_TIMEOUT_S)  # a loaded machine trains slowly
    assert sweeper.returncode == 0, output[-3000:]
    assert _jobs(sweep / "0") == [first] and f"SLURM job {first} requeued" in output  # same job, same trial
    assert "preempted" in (sweep / "0" / "train.log").read_text()
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


def test_a_job_command_resumes_itself_leaves_the_sweeper_pid_out_and_runs_torchrun_for_several_processes():
    from harness.launch.runner import AppCommand, TrialSpec
    from hydra_plugins.harness_slurm_launcher.runner import SlurmTrialRunner

    app = AppCommand("python", ("train.py",), (), "/work")
    env = {"HARNESS_OPTUNA_TRIAL_ID": "4", "HARNESS_OPTUNA_SWEEPER_PID": "77"}
    spec = TrialSpec(3, Path("/sweep/3"), ("optim.lr=0.01", "resume=null"), env, 0, 2)
    one = SlurmTrialRunner({"nodes": 1, "tasks_per_node": 1}).command(app, spec)
    assert one[:3] == ["env", "HARNESS_OPTUNA_TRIAL_ID=4", "PYTHONUNBUFFERED=1"] and one[3:5] == ["python", "train.py"]
    assert "resume=auto" in one and "resume=null" not in one  # a requeued job continues its run dir
    node = SlurmTrialRunner({"nodes": 1, "tasks_per_node": 2}).command(app, spec)
    agent = "hydra_plugins.harness_slurm_launcher.torchrun_agent"  # torchrun that outlives the stop signals
    assert node[3:8] == [sys.executable, "-m", agent, "--nproc_per_node=2", "--standalone"]
    many = SlurmTrialRunner({"nodes": 2, "tasks_per_node": 4}).command(app, spec)
    assert many[-3:-1] == ["bash", "-c"]
    first, launch = many[-1].split("; exec ", 1)
    assert first == 'MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)'
    assert launch.startswith(f"{sys.executable} -m {agent} --nproc_per_node=4 --nnodes=2 "
                             "--rdzv_backend=c10d --rdzv_endpoint=$MASTER:29500 --rdzv_id=$SLURM_JOB_ID train.py "
                             "optim.lr=0.01 resume=auto")
    assert "hydra.run.dir='/sweep/3'" in shlex.split(launch)  # quoted for the shell


def test_stopping_the_sweeper_cancels_its_jobs(slurm, tmp_path, cleanup):
    sweep = tmp_path / "sweep"
    command = ["-m", *SLURM, "hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=2", "optim.lr=interval(1e-3,1e-2)",
               *TRIAL, "model.width=256", "trainer.max_steps=100000", f"hydra.sweep.dir={sweep}"]
    sweeper = _start(cleanup, command, tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for n in range(2):  # both trials are training inside their jobs
        wait_until(_log_has(sweep / str(n) / "train.log", "step "), f"trial {n}'s first logged step")
    jobs = {job for n in range(2) for job in _jobs(sweep / str(n))}
    sweeper.send_signal(signal.SIGINT)  # Ctrl-C
    output, _ = sweeper.communicate(timeout=EVENT_TIMEOUT_S)
    wait_until(lambda: not jobs & _queued(), "the cancelled jobs to leave squeue")
    assert len(jobs) == 2 and sweeper.returncode == 130, output[-2000:]
    assert not (sweep / "2").exists()  # nothing new was queued after the stop


@pytest.mark.slow  # ~30 s; a sweep's jobs and their cancellation run in the default suite
def test_a_sweeper_killed_with_jobs_running_is_rerun_and_waits_for_them_without_duplicates(slurm, tmp_path, cleanup):
    import optuna

    sweep = tmp_path / "sweep"
    command = ["-m", *SLURM, "hydra.sweeper.n_trials=3", "hydra.sweeper.n_jobs=2", "optim.lr=interval(1e-3,1e-2)",
               *TRIAL, "model.width=256", "trainer.max_steps=3000", f"hydra.sweep.dir={sweep}"]
    first = _start(cleanup, command, tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for n in range(2):
        wait_until(_log_has(sweep / str(n) / "train.log", "step "), f"trial {n}'s first logged step")
    first.kill()  # SIGKILL: no chance to cancel anything
    first.wait()
    running = [job for n in range(2) for job in _jobs(sweep / str(n))]
    assert len(running) == 2 and set(running) <= _queued()  # the jobs outlive their sweeper
    rerun = _start(cleanup, command, tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, output[-3000:]
    assert "still have their jobs: waiting for them" in output
    assert all(_jobs(sweep / str(n)) == [running[n]] for n in range(2))  # waited for, not submitted again
    trials = _study(sweep).trials
    done = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 3  # n_trials exact
    # the only other trial is the proposal the killed sweeper held ready: never run, not counted
    assert all(t.user_attrs["reason"] == "interrupted" and not (sweep / str(t.number)).exists()
               for t in trials if t not in done)
    assert sum(len(_jobs(sweep / str(t.number))) for t in done) == 3  # one job per trial, none twice


@pytest.mark.slow  # ~25 s; a sweep's jobs on the cluster and their cancellation stay in the default suite
def test_a_single_run_is_submitted_as_one_job_and_returns_or_waits(slurm, tmp_path, cleanup):
    run = ["hydra/launcher=slurm", "hydra.launcher.partition=debug", *TRIAL, "trainer.max_steps=50"]
    queued = run_cli([*run, f"hydra.run.dir={tmp_path / 'queued'}"], cwd=tmp_path)
    assert queued.returncode == 0, queued.stderr[-2000:]
    job = queued.stdout.split("submitted SLURM job ", 1)[1].split(";")[0]
    assert f"log {tmp_path / 'queued' / '.submitit' / f'{job}_0_log.out'}" in queued.stdout
    wait_until(lambda: job not in _queued(), f"job {job} to end")
    assert json.loads((tmp_path / "queued" / "summary.json").read_text())["status"] == "completed"
    assert f"running as SLURM job {job} on " in (tmp_path / "queued" / "train.log").read_text()
    waited = run_cli([*run, "hydra.launcher.wait=true", f"hydra.run.dir={tmp_path / 'waited'}"], cwd=tmp_path)
    assert waited.returncode == 0 and "ended with exit code 0" in waited.stdout, waited.stderr[-2000:]
    assert json.loads((tmp_path / "waited" / "summary.json").read_text())["status"] == "completed"
    refused = run_cli([*run, "batch_size=7", "accum=2", f"hydra.run.dir={tmp_path / 'refused'}"], cwd=tmp_path)
    assert "batch_size=7" in one_line_error(refused, "batch_size") and not (tmp_path / "refused").exists()


@pytest.mark.slow  # ~40 s; a one-process trial's requeue runs in the default suite
def test_a_two_process_trial_runs_torchrun_inside_its_one_job_and_survives_a_requeue(slurm, tmp_path, cleanup):
    sweep = tmp_path / "sweep"
    steps = ["model.width=256", "trainer.max_steps=1500", "trainer.ckpt_every=100", "trainer.log_every=50"]
    sweeper = _start(cleanup, ["-m", *SLURM, "hydra.launcher.tasks_per_node=2", "hydra.launcher.cpus_per_task=2",
                               "hydra.sweeper.n_trials=1", "optim.lr=choice(0.003)", *TRIAL, *steps,
                               f"hydra.sweep.dir={sweep}"], tmp_path, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT, text=True)
    log = sweep / "0" / "train.log"
    wait_until(_log_has(log, "step 200/1500"), "the trial's step 200")
    (job,) = _jobs(sweep / "0")
    subprocess.run(["scancel", "-s", "USR2", job], check=True)
    _start_when_requeued(job)
    output, _ = sweeper.communicate(timeout=2 * EVENT_TIMEOUT_S)  # a loaded machine trains slowly
    assert sweeper.returncode == 0, output[-3000:]
    text = log.read_text()
    assert f"running as 2 processes, SLURM job {job} on " in text and f"SLURM job {job} requeued" in output
    assert "preempted after" in text and "resumed from" in text
    summary = json.loads((sweep / "0" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 1500


def test_the_slurm_launcher_under_hydras_basic_sweeper_is_refused_and_leaves_nothing(tmp_path):
    sweep = tmp_path / "sweep"
    result = run_cli(["-m", "hydra/launcher=slurm", "optim.lr=1e-3,2e-3", *TRIAL, "debug=smoke",
                      f"hydra.sweep.dir={sweep}"], cwd=tmp_path)
    line = one_line_error(result, "hydra/launcher")
    assert "used with hydra/sweeper=optuna" in line and not sweep.exists()
