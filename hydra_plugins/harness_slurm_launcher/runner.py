"""One trial as one SLURM job, submitted through submitit (the sweeper's trial-runner seam).

- The job runs `train.py` with the trial's overrides and `resume=auto`, so whenever SLURM starts
  it again (requeued after a preemption or a time-limit warning) it continues its run dir.
  With several processes per node, or several nodes, it runs torchrun instead, one per node
  (the torchrun launcher's command), meeting at the allocation's first node.
- It is submitted with SIGUSR2 `signal_delay_s` before its time limit (as submitit asks). The
  trial checkpoints and exits as `preempted`, and submitit requeues the job: same job id, same
  Optuna trial, whether or not a sweeper is still watching. A job the cluster ends after a
  preemption without requeueing it is submitted again by the runner, up to `max_requeues` times.
- Stopping the sweep (Ctrl-C, SIGTERM) cancels the trial's job, queued or running. A sweeper that
  is killed leaves its jobs running; `slurm_jobs.txt` in the trial's run dir names them, so the
  next sweeper waits for them (`rejoin`) instead of running the trial again.

This module is imported during Hydra's plugin scan: submitit is imported only when a job is
submitted. No `from __future__ import annotations` (see the sweeper's runner.py).
"""
import logging
import os
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, List, Mapping, Optional, Tuple

from omegaconf import OmegaConf

from harness.loop.callbacks.sweep_trial import ENV_SWEEPER_PID
from harness.launch.runner import AppCommand, ProcessResult, TrialRunner, TrialSpec
from hydra_plugins.harness_slurm_launcher.config import launcher_params
from harness.launch.torchrun import torchrun_prefix

log = logging.getLogger("harness")
JOBS_FILE = "slurm_jobs.txt"  # in the run dir: one line per job, "JOB_ID LOG_PATH"
RENDEZVOUS_PORT = 29500
TORCHRUN_AGENT = "hydra_plugins.harness_slurm_launcher.torchrun_agent"
ENDED_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
                "BOOT_FAIL", "DEADLINE")


class SlurmTrialRunner(TrialRunner):
    def __init__(self, params: Mapping[str, Any], what: str = "trial {number}", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.params = launcher_params(params)
        self.what = what  # how log lines name the job's run

    def capacity(self, requested: int) -> int:
        """Jobs in flight at once: `max_parallel` when set, else what the sweep asked for."""
        cap = self.params["max_parallel"]
        return min(requested, cap) if cap else requested

    def env(self, spec: TrialSpec) -> dict:
        return {}  # a job has its own CPUs: nothing of this machine's to share out

    def command(self, app: AppCommand, spec: TrialSpec) -> List[str]:
        """`python train.py ... resume=auto`, or torchrun when the job has more than one process.
        The trial does not watch the sweeper's pid: the job outlives it, on another machine."""
        nodes, per_node = self.params["nodes"], self.params["tasks_per_node"]
        own = tuple(o for o in spec.overrides if o not in ("resume=null", "resume=auto"))
        resumes = any(o.startswith("resume=") for o in own)  # a checkpoint the user named stays theirs
        argv = self.app_argv(app, replace(spec, overrides=own if resumes else (*own, "resume=auto")))
        env = {k: v for k, v in spec.env.items() if k != ENV_SWEEPER_PID}
        if self.params["cpus_per_task"] and nodes == per_node == 1 and "OMP_NUM_THREADS" not in os.environ:
            env["OMP_NUM_THREADS"] = str(self.params["cpus_per_task"])  # torch would take every core of the node
        variables = [f"{k}={v}" for k, v in {**env, "PYTHONUNBUFFERED": "1"}.items()]
        if nodes == 1 and per_node == 1:
            return ["env", *variables, app.python, *argv]
        rendezvous = OmegaConf.create({
            "nproc_per_node": per_node, "nnodes": nodes, "rdzv_backend": "c10d", "node_rank": None,
            "rdzv_endpoint": f"$MASTER:{RENDEZVOUS_PORT}" if nodes > 1 else None,
            "rdzv_id": "$SLURM_JOB_ID" if nodes > 1 else None})
        torchrun = torchrun_prefix(rendezvous)
        torchrun[1:3] = ["-m", TORCHRUN_AGENT]  # its flags, under an agent that outlives the stop signals
        if nodes == 1:  # --standalone: a free port of its own, whatever else runs on the node
            return ["env", *variables, *torchrun, *argv]
        line = " ".join(a if "$" in a else shlex.quote(a) for a in [*torchrun, *argv])
        first = 'MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)'
        return ["env", *variables, "bash", "-c", f"{first}; exec {line}"]

    def executor(self, folder: Path, name: str) -> Any:
        submitit = _submitit()
        p = self.params
        executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm",
                                         slurm_max_num_timeout=p["max_requeues"])
        extra = {k: p[k] for k in ("account", "qos", "constraint") if p[k] is not None}
        executor.update_parameters(
            name=name, nodes=p["nodes"], tasks_per_node=1, timeout_min=p["time"],
            gpus_per_node=p["gpus_per_node"] or None, cpus_per_task=p["cpus_per_task"],
            mem_gb=p["mem_gb"], slurm_partition=p["partition"],
            slurm_signal_delay_s=p["signal_delay_s"], slurm_setup=p["setup"],
            slurm_additional_parameters=p["additional_parameters"],
            **{f"slurm_{k}": v for k, v in extra.items()})
        return executor

    def submit(self, app: AppCommand, spec: TrialSpec, folder: Optional[Path] = None) -> Any:
        """Queue the trial's job and record it in the run dir; returns submitit's Job. Its files
        (script, log, result) go to `folder`, by default the sweep dir's `.submitit/`."""
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        folder = folder or spec.run_dir.parent / ".submitit"
        job = self.executor(folder, self._name(spec).replace(" ", "-")).submit(TrialJob(self.command(app, spec), app.cwd))
        with open(spec.run_dir / JOBS_FILE, "a") as jobs:
            jobs.write(f"{job.job_id} {job_log(job)}\n")
        return job

    def run(self, app: AppCommand, spec: TrialSpec, stop: threading.Event) -> ProcessResult:
        job = self.submit(app, spec)
        log.info("%s: SLURM job %s, log %s", self._name(spec), job.job_id, job_log(job))
        return self.follow(job, app, spec, stop)

    def can_rejoin(self, run_dir: Path) -> bool:
        """A job was submitted for this trial: it may still run, or have ended while nobody watched."""
        return (run_dir / JOBS_FILE).is_file()

    def rejoin(self, app: AppCommand, spec: TrialSpec, stop: threading.Event) -> ProcessResult:
        """Wait for the job an earlier (killed) sweeper submitted for this trial."""
        submitit = _submitit()
        job_id, log_path = (spec.run_dir / JOBS_FILE).read_text().split()[-2:]
        job = submitit.SlurmJob(folder=Path(log_path).parent, job_id=job_id)
        log.info("%s: waiting for its SLURM job %s (submitted by an earlier sweeper), log %s",
                 self._name(spec), job_id, log_path)
        return self.follow(job, app, spec, stop)

    def follow(self, job: Any, app: AppCommand, spec: TrialSpec, stop: threading.Event) -> ProcessResult:
        """Until the trial is over: its job ended and was not preempted, or the sweep stopped."""
        started, resubmitted = time.time(), 0
        while True:
            killed, ended_as = self._wait(job, spec, stop, started)
            if killed:
                return ProcessResult(None, killed, started, time.time(), job_log(job))
            if ended_as != "PREEMPTED" or resubmitted >= self.params["max_requeues"]:
                return ProcessResult(_exit_code(job), None, started, time.time(), job_log(job))
            resubmitted += 1  # the cluster ended it after a preemption without requeueing it
            job = self.submit(app, spec, job_log(job).parent)
            log.info("%s: preempted and not requeued by SLURM; submitted again as job %s (%d of at most %s)",
                     self._name(spec), job.job_id, resubmitted, self.params["max_requeues"])

    def _wait(self, job: Any, spec: TrialSpec, stop: threading.Event, started: float
              ) -> Tuple[Optional[str], Optional[str]]:
        """Until the job ends: (None, its final state when the controller still knows it). When the
        sweep stops or the trial's time is up the job is cancelled: (why, None)."""
        restarts = None
        while True:
            state = job_state(job.job_id)
            if job.paths.result_pickle.exists() or state is None or state.name in ENDED_STATES:
                return None, state.name if state else None
            if restarts is not None and state.restarts > restarts:
                log.info("%s: SLURM job %s requeued; it resumes from its last checkpoint", self._name(spec),
                         job.job_id)
            restarts = state.restarts
            reason = self._kill_reason(stop, started)
            if reason:
                job.cancel(check=False)
                return reason, None
            stop.wait(self.params["poll_s"])

    def _name(self, spec: TrialSpec) -> str:
        return self.what.format(number=spec.number)


class TrialJob:
    """What runs in the job: the trial's command, with the stop signals passed on to it.

    SLURM's warning before the time limit (SIGUSR2, what submitit asks for) reaches submitit's
    process, which calls `checkpoint`: the trial gets SIGUSR1, checkpoints and exits as
    `preempted`, and submitit requeues the job with the same command (`resume=auto`)."""

    def __init__(self, command: List[str], cwd: str) -> None:
        self.command, self.cwd = command, cwd  # all that is pickled: the rest exists in the job only

    def __call__(self) -> int:
        self._exited, self._terminated = threading.Event(), False
        self._proc = subprocess.Popen(self.command, cwd=self.cwd)
        signal.signal(signal.SIGUSR1, lambda signum, _: self._signal(signum))
        signal.signal(signal.SIGTERM, self._on_sigterm)
        threading.Thread(target=self._reap, daemon=True).start()
        while not self._exited.wait(1.0):  # the main thread stays free for signal handlers
            pass
        if self._terminated:  # preempted or cancelled: no result, so a requeued job is not taken as done
            raise SystemExit(f"stopped by SIGTERM; the trial exited with code {self._proc.returncode}")
        if self._proc.returncode != 0:
            raise RuntimeError(f"the trial exited with code {self._proc.returncode}")
        return 0

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        """A preemption (or scancel): the trial checkpoints and exits as `preempted`."""
        self._terminated = True
        self._signal(signum)

    def _signal(self, signum: int) -> None:
        """To the trial and everything it started: torchrun's ranks run in sessions of their own."""
        for pid in process_tree(self._proc.pid):
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass

    def checkpoint(self) -> Any:
        """submitit's hook on SIGUSR2: stop the trial at a checkpoint, then requeue the same job."""
        import submitit

        if getattr(self, "_proc", None) is not None and not self._exited.is_set():
            self._signal(signal.SIGUSR1)
            while not self._exited.is_set():
                time.sleep(0.2)
        return submitit.helpers.DelayedSubmission(TrialJob(self.command, self.cwd))

    def _reap(self) -> None:
        self._proc.wait()
        self._exited.set()


def process_tree(root: int) -> List[int]:
    """`root` and its descendants, read from /proc (a SLURM node runs Linux)."""
    children: dict = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # the name in () may hold spaces
        except (OSError, IndexError, ValueError):
            continue  # ended while being read
        children.setdefault(parent, []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def job_log(job: Any) -> Path:
    return Path(str(job.paths.stdout).replace("%j", str(job.job_id)))


@dataclass(frozen=True)
class JobState:
    name: str  # PENDING, RUNNING, ...
    restarts: int  # times SLURM requeued the job


def job_state(job_id: str) -> Optional[JobState]:
    """What the controller says of a job; None once it has forgotten it (MinJobAge after its end).
    Without sacct (no accounting storage) submitit cannot tell a job that left the queue
    (killed, cancelled) from one still queued, so the controller is asked directly."""
    shown = subprocess.run(["scontrol", "-o", "show", "job", str(job_id)], capture_output=True, text=True)
    if shown.returncode != 0:
        return None if "Invalid job id" in shown.stderr else JobState("UNKNOWN", 0)
    fields = dict(item.split("=", 1) for item in shown.stdout.split() if "=" in item)
    return JobState(fields.get("JobState", "UNKNOWN"), int(fields.get("Restarts", 0)))


def _submitit() -> Any:
    """The submitit module, told to keep quiet about the accounting storage a cluster may lack:
    job states come from `scontrol` here, never from its `sacct` polling."""
    import submitit

    logging.getLogger("submitit").setLevel(logging.ERROR)
    return submitit


def _exit_code(job: Any) -> int:
    """0 when the job's command succeeded; 1 when it failed or SLURM ended the job first (no result)."""
    if not job.paths.result_pickle.exists():
        return 1
    try:
        job.result()
    except Exception:  # noqa: BLE001 - the command failed, or SLURM ended the job (its log says why)
        return 1
    return 0
