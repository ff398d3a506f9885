"""How one trial process is started and stopped: the seam for other ways to launch a trial.

Hydra's `Launcher.launch(batch)` returns only when the whole batch is done, which leaves slots
idle behind the slowest trial. The sweeper therefore starts trials itself, one worker thread
per slot, through a `TrialRunner`:

    command(app, spec) -> argv    what to execute (override to wrap it, e.g. in torchrun)
    env(spec)          -> dict    extra environment (override to pin GPUs per slot)
    run(app, spec, stop)          starts the process, logs to <run_dir>/trial.log, waits,
                                  and kills its process group on `stop` or timeout
    can_rejoin(run_dir), rejoin(app, spec, stop)
                                  wait for a trial a killed sweeper left running (cluster jobs)

A runner that wraps the command subclasses `TrialRunner` and overrides `command` and `env`:
the torchrun launcher's `TorchrunTrialRunner` (hydra_plugins/harness_torchrun_launcher/runner.py)
runs each trial as a torchrun job on its own GPU slice, the SLURM launcher's `SlurmTrialRunner`
queues each as a job. A runner is selected with `hydra.sweeper.runner._target_=...`, or offered
by a Launcher plugin: when the selected `hydra/launcher` has a method `trial_runner(n_slots,
grace_s=..., timeout_s=...)`, the sweeper runs its trials through the runner it returns.
This module is imported during Hydra's plugin scan: keep it free of optuna.
No `from __future__ import annotations`: the scanner runs the module before it is in
sys.modules, and dataclasses then fail to resolve string annotations.
"""

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Optional

from hydra.core.override_parser.types import Quote, QuotedString

LOG_NAME = "trial.log"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True)
class AppCommand:
    """How to start the Hydra app that started the sweep, as the user started it."""

    python: str  # interpreter of the sweep
    entry: tuple[str, ...]  # ("path/to/train.py",) or ("-m", "pkg.train")
    args: tuple[str, ...]  # --config-path/--config-name/--config-dir + forwarded hydra.* overrides
    cwd: str  # the user's working directory, so relative paths mean the same


@dataclass(frozen=True)
class TrialSpec:
    """One trial to run."""

    number: int  # Optuna trial number; also the name of its run dir
    run_dir: Path  # <hydra.sweep.dir>/<number>
    overrides: tuple[str, ...]  # the app's overrides: fixed ones + this trial's parameters
    env: Mapping[str, str]  # HARNESS_OPTUNA_* variables that let the trial report and prune
    slot: int  # 0 <= slot < n_slots; stable while the trial runs (e.g. which GPUs)
    n_slots: int  # hydra.sweeper.n_jobs


@dataclass(frozen=True)
class ProcessResult:
    """What happened to the trial process; judging it against summary.json happens elsewhere."""

    exit_code: Optional[int]  # None when the sweeper killed it
    killed: Optional[str]  # "interrupted" | "timeout" | None
    started_at: float  # unix time at spawn
    ended_at: float  # unix time the process was reaped
    log_path: Path


class TrialRunner:
    """Runs a trial as a child process in its own process group (so all of it can be killed)."""

    def __init__(self, grace_s: float = 10.0, timeout_s: Optional[float] = None) -> None:
        self.grace_s = grace_s
        self.timeout_s = timeout_s

    def capacity(self, requested: int) -> int:
        """How many trials may run at once; a runner bound to devices may allow fewer."""
        return requested

    def app_argv(self, app: AppCommand, spec: TrialSpec) -> list[str]:
        """The app's own arguments for this trial, without the interpreter."""
        run_dir = QuotedString(text=str(spec.run_dir), quote=Quote.single).with_quotes()
        return [*app.entry, *app.args, *spec.overrides, f"hydra.run.dir={run_dir}",
                f"hydra.job.num={spec.number}"]

    def command(self, app: AppCommand, spec: TrialSpec) -> list[str]:
        return [app.python, *self.app_argv(app, spec)]

    def env(self, spec: TrialSpec) -> dict[str, str]:
        # Several trials share the CPU: split its cores instead of oversubscribing them
        # (torchrun does the same). A value set by the user wins.
        if "OMP_NUM_THREADS" in os.environ:
            return {}
        return {"OMP_NUM_THREADS": str(max(1, (os.cpu_count() or 1) // spec.n_slots))}

    def run(self, app: AppCommand, spec: TrialSpec, stop: threading.Event) -> ProcessResult:
        """Run to completion, or until `stop` is set or `timeout_s` passes."""
        spec.run_dir.mkdir(parents=True, exist_ok=True)
        log_path = spec.run_dir / LOG_NAME
        env = {**os.environ, **spec.env, **self.env(spec), "PYTHONUNBUFFERED": "1"}
        with open(log_path, "ab") as log:
            started = time.time()
            proc = subprocess.Popen(
                self.command(app, spec),
                cwd=app.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own process group: Ctrl-C reaches only the sweeper, which then stops trials
                # deliberately, and killpg also reaches a trial's children (torchrun ranks).
                start_new_session=True,
                preexec_fn=_die_with_parent(),
            )
        # A blocking wait notices the exit at once (polling would leave the slot idle for up
        # to its interval); a watcher thread handles stop and timeout meanwhile.
        exited = threading.Event()
        killed: list[str] = []
        watcher = threading.Thread(target=self._watch, args=(proc, stop, exited, started, killed),
                                   daemon=True)
        watcher.start()
        proc.wait()
        ended = time.time()
        exited.set()
        watcher.join()
        return ProcessResult(
            exit_code=None if killed else proc.returncode,
            killed=killed[0] if killed else None,
            started_at=started,
            ended_at=ended,
            log_path=log_path,
        )

    def can_rejoin(self, run_dir: Path) -> bool:
        """Whether a trial that a killed sweeper left running may still be waited for. A local
        process died with its sweeper (or was left alone to stop itself); a cluster job lives on."""
        return False

    def rejoin(self, app: AppCommand, spec: TrialSpec, stop: threading.Event) -> ProcessResult:
        """Wait for the trial an earlier sweeper started, as `run` waits for its own."""
        raise NotImplementedError(f"{type(self).__name__} cannot rejoin a trial")

    def _watch(self, proc: subprocess.Popen, stop: threading.Event, exited: threading.Event,
               started: float, killed: list[str]) -> None:
        """Until the process exits: kill it when the sweep stops or its time is up."""
        while not exited.wait(0.2):
            reason = self._kill_reason(stop, started)
            if reason:
                killed.append(reason)
                self._terminate(proc)
                return

    def _kill_reason(self, stop: threading.Event, started: float) -> Optional[str]:
        if stop.is_set():
            return "interrupted"
        if self.timeout_s is not None and time.time() - started > self.timeout_s:
            return "timeout"
        return None

    def _terminate(self, proc: subprocess.Popen) -> None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _die_with_parent() -> Optional[Callable[[], None]]:
    """Linux: have the kernel send SIGTERM to the trial when the sweeper dies, SIGKILL included
    (the trial saves a checkpoint and stops). Elsewhere the trial watches its parent itself
    (harness.loop.callbacks.sweep_trial.watch_sweeper). The C function is resolved here, in the parent: the child of
    a threaded process must not load libraries."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the sweeper died before the line above took effect
            os._exit(1)

    return arm
