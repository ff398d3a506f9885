"""One trial as one SLURM job, submitted through submitit (the sweeper's trial-runner seam).

- The job runs `train.py` with the trial's overrides; with several processes per node (or several
  nodes) it runs torchrun instead, one per node, meeting at the allocation's first node.
- It is submitted with a signal `signal_delay_s` before its time limit (SIGUSR2, as submitit asks;
  the trial gets it as SIGUSR1 from the job as well). The harness checkpoints
  and exits as `preempted`; the runner then submits the trial again with `resume=auto`, so it
  stays the same Optuna trial and its run dir goes on. A job the cluster preempts the same way
  is resubmitted too.
- Stopping the sweep (Ctrl-C, SIGTERM) cancels the trial's job, queued or running.

This module is imported during Hydra's plugin scan: submitit is imported only when a job is
submitted. No `from __future__ import annotations` (see the sweeper's runner.py).
"""
import json
import logging
import shlex
import signal
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from hydra_plugins.harness_optuna_sweeper.runner import AppCommand, ProcessResult, TrialRunner, TrialSpec

log = logging.getLogger("harness")
RENDEZVOUS_PORT = 29500
RESUMED_STATUSES = ("preempted",)  # summary.json statuses after which the trial is submitted again


class SlurmTrialRunner(TrialRunner):
    def __init__(self, params: Mapping[str, Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.params = dict(params)
        # A cluster without accounting storage (no sacct) makes submitit warn at every look at a job.
        logging.getLogger("submitit").setLevel(logging.ERROR)

    def capacity(self, requested: int) -> int:
        """Jobs in flight at once: `max_parallel` when set, else what the sweep asked for."""
        cap = self.params.get("max_parallel")
        return min(requested, int(cap)) if cap else requested

    def env(self, spec: TrialSpec) -> Dict[str, str]:
        return {}  # a job has its own CPUs: nothing of this machine's to share out

    def command(self, app: AppCommand, spec: TrialSpec) -> List[str]:
        """`python train.py ...`, or torchrun when the job has more than one process."""
        nodes, per_node = int(self.params["nodes"]), int(self.params["tasks_per_node"])
        argv = [*self.app_argv(app, spec)]
        variables = [f"{k}={v}" for k, v in {**spec.env, "PYTHONUNBUFFERED": "1"}.items()]
        if nodes == 1 and per_node == 1:
            return ["env", *variables, app.python, *argv]
        torchrun = [app.python, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--nproc_per_node={per_node}",
                    "--rdzv_backend=c10d", f"--rdzv_endpoint=$MASTER:{RENDEZVOUS_PORT}", "--rdzv_id=$SLURM_JOB_ID"]
        line = " ".join(shlex.quote(a) if "$" not in a else a for a in [*torchrun, *argv])
        first = 'MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)'
        return ["env", *variables, "bash", "-c", f"{first}; exec {line}"]

    def executor(self, folder: Path, spec: TrialSpec) -> Any:
        import submitit

        p = self.params
        executor = submitit.AutoExecutor(folder=str(folder), cluster="slurm")
        extra = {k: v for k, v in {"account": p.get("account"), "qos": p.get("qos"),
                                   "constraint": p.get("constraint")}.items() if v is not None}
        executor.update_parameters(
            name=f"trial-{spec.number}", nodes=int(p["nodes"]), tasks_per_node=1, timeout_min=int(p["time"]),
            gpus_per_node=int(p["gpus_per_node"]) or None, cpus_per_task=p.get("cpus_per_task"),
            mem_gb=p.get("mem_gb"), slurm_partition=p.get("partition"), slurm_signal_delay_s=int(p["signal_delay_s"]),
            slurm_setup=list(p.get("setup") or []), slurm_additional_parameters=dict(p.get("additional_parameters") or {}),
            **{f"slurm_{k}": v for k, v in extra.items()})
        return executor

    def run(self, app: AppCommand, spec: TrialSpec, stop: threading.Event) -> ProcessResult:
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        started, current, requeues = time.time(), spec, 0
        while True:
            submitted = time.time()
            job = self.executor(spec.run_dir.parent / ".submitit", spec).submit(
                TrialJob(self.command(app, current), app.cwd))
            log_path = Path(str(job.paths.stdout).replace("%j", str(job.job_id)))
            log.info("trial %d: SLURM job %s, log %s", spec.number, job.job_id, log_path)
            with open(spec.run_dir / "slurm_jobs.txt", "a") as jobs:
                jobs.write(f"{job.job_id} {log_path}\n")
            killed = self._wait(job, stop, started)
            if killed:
                return ProcessResult(None, killed, started, time.time(), log_path)
            exit_code = _exit_code(job)
            if _status(spec.run_dir, submitted) in RESUMED_STATUSES and requeues < int(self.params["max_requeues"]):
                requeues += 1
                log.info("trial %d: job %s stopped before its time limit (preempted); submitted again with "
                         "resume=auto (%d of at most %s)", spec.number, job.job_id, requeues,
                         self.params["max_requeues"])
                current = replace(spec, overrides=(*spec.overrides, "resume=auto"))
                continue
            return ProcessResult(exit_code, None, started, time.time(), log_path)

    def _wait(self, job: Any, stop: threading.Event, started: float) -> Optional[str]:
        """Until the job ends; cancel it when the sweep stops or the trial's time is up."""
        while not _done(job):
            reason = self._kill_reason(stop, started)
            if reason:
                job.cancel(check=False)
                return reason
            stop.wait(float(self.params["poll_s"]))
        return None


class TrialJob:
    """What runs in the job: the trial's command, with the stop signals passed on to it. SLURM's
    warning before the time limit (submitit asks for SIGUSR2) and a preemption's SIGTERM reach
    submitit's process first; the trial gets SIGUSR1 or SIGTERM, checkpoints and exits as
    `preempted`, and the sweeper submits it again."""

    def __init__(self, command: List[str], cwd: str) -> None:
        self.command, self.cwd = command, cwd

    def __call__(self) -> int:
        proc = subprocess.Popen(self.command, cwd=self.cwd)
        passed_on = {signal.SIGUSR2: signal.SIGUSR1, signal.SIGUSR1: signal.SIGUSR1, signal.SIGTERM: signal.SIGTERM}
        for received, sent in passed_on.items():
            signal.signal(received, lambda *_, sent=sent: proc.send_signal(sent))
        code = proc.wait()
        if code != 0:
            raise RuntimeError(f"the trial exited with code {code}")
        return code


def _done(job: Any) -> bool:
    """Whether the job ended. Without sacct (no accounting storage) submitit cannot tell a job that
    vanished from squeue (killed, cancelled) from one still queued, so squeue is asked directly."""
    if job.done():
        return True
    listed = subprocess.run(["squeue", "-h", "-j", str(job.job_id), "-o", "%i"], capture_output=True, text=True)
    return listed.returncode == 0 and not listed.stdout.strip()


def _exit_code(job: Any) -> int:
    try:
        job.result()
    except Exception:  # noqa: BLE001 - the command failed, or SLURM ended the job (its log says why)
        return 1
    return 0


def _status(run_dir: Path, since: float) -> Optional[str]:
    """summary.json's status, when this job wrote it (not an earlier attempt)."""
    summary = run_dir / "summary.json"
    if not summary.is_file() or summary.stat().st_mtime < since:
        return None
    return json.loads(summary.read_text()).get("status")
