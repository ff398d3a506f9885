"""The link between a training process and the Optuna study of the sweep that started it.

The sweeper runs every trial as a separate process and tells it, through HARNESS_OPTUNA_*
environment variables, where its study lives. The training loop reports its eval metric and
asks whether to stop:

    reporter = TrialReporter.from_env()          # None outside a sweep
    ...after each eval:
    if reporter is not None:
        reporter.report(val_loss, step)
        if reporter.should_prune():
            ...write summary.json with status "pruned" and return normally

The pruner's decision is computed here, in the trial process, from the intermediate values
all trials wrote to the shared storage. Under DDP every rank may call both methods: only rank 0
writes values, and the ranks must combine their verdicts (e.g. all-reduce) so that they stop
together. optuna is imported only when a reporter is used, so importing this module costs
nothing in a plain run.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Optional

ENV_STORAGE = "HARNESS_OPTUNA_STORAGE"  # SQLAlchemy URL of the study's storage
ENV_STUDY = "HARNESS_OPTUNA_STUDY"  # study name
ENV_TRIAL_ID = "HARNESS_OPTUNA_TRIAL_ID"  # storage-wide trial id
ENV_TRIAL_NUMBER = "HARNESS_OPTUNA_TRIAL_NUMBER"  # number within the study (informational)
ENV_PRUNER = "HARNESS_OPTUNA_PRUNER"  # JSON {"class": "MedianPruner", "kwargs": {...}}
ENV_SWEEPER_PID = "HARNESS_OPTUNA_SWEEPER_PID"  # a trial whose sweeper died stops itself

log = logging.getLogger(__name__)


def open_storage(url: str, schema_ready: bool = False) -> Any:
    """An Optuna RDB storage that tolerates several processes writing one sqlite file.

    `schema_ready`: the sweeper already created and checked the tables, so a trial process
    skips that (concurrent DDL from many trials would only contend for the database lock).
    """
    import optuna
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import IntegrityError, ProgrammingError

    engine_kwargs: dict[str, Any] = {}
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        _write_ahead_log(Path(parsed.database))
        # sqlite serialises writers; the default 5 s lock timeout is too short when several
        # trials report while the sweeper records results.
        engine_kwargs["connect_args"] = {"timeout": 60}

    def connect() -> Any:
        return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                          skip_compatibility_check=schema_ready,
                                          skip_table_creation=schema_ready)

    try:
        return connect()
    except (IntegrityError, ProgrammingError):
        # Sweepers on several machines creating a fresh database's tables at the same moment
        # collide; the loser finds the tables made when it tries again.
        time.sleep(2.0)
        return connect()


def _write_ahead_log(db: Path) -> None:
    """WAL mode (kept by the file for every later connection): a commit costs one fsync
    instead of several, and trials reporting values do not block the sweeper. Not for network
    filesystems, where sqlite is unsafe anyway."""
    import sqlite3
    from contextlib import closing

    db.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db, timeout=60)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")


def build_pruner(spec: Mapping[str, Any]) -> Any:
    """`{"class": "MedianPruner", "kwargs": {...}}` -> the optuna pruner (only optuna's own)."""
    import optuna

    cls = getattr(optuna.pruners, spec["class"])
    return cls(**spec.get("kwargs", {}))


class TrialReporter:
    """Reports intermediate values of one running trial and relays the pruner's verdict."""

    def __init__(
        self,
        storage: str,
        study_name: str,
        trial_id: int,
        pruner: Optional[Mapping[str, Any]] = None,
        sweeper_pid: Optional[int] = None,
        rank: int = 0,
    ) -> None:
        import optuna

        self._study = optuna.load_study(
            study_name=study_name,
            storage=open_storage(storage, schema_ready=True),
            pruner=build_pruner(pruner) if pruner else optuna.pruners.NopPruner(),
        )
        self._trial = optuna.trial.Trial(self._study, trial_id)
        self._multi_objective = len(self._study.directions) > 1
        self._sweeper_pid = sweeper_pid
        self._writes = rank == 0  # the same value from every rank would be reported N times
        self._finished_elsewhere = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> "TrialReporter | None":
        """The reporter of the current trial, or None when not running under the sweeper."""
        if not all(k in environ for k in (ENV_STORAGE, ENV_STUDY, ENV_TRIAL_ID)):
            return None
        pruner = json.loads(environ[ENV_PRUNER]) if environ.get(ENV_PRUNER) else None
        pid = environ.get(ENV_SWEEPER_PID)
        return cls(
            storage=environ[ENV_STORAGE],
            study_name=environ[ENV_STUDY],
            trial_id=int(environ[ENV_TRIAL_ID]),
            pruner=pruner,
            sweeper_pid=int(pid) if pid else None,
            rank=int(environ.get("RANK", "0")),
        )

    @property
    def sweeper_pid(self) -> Optional[int]:
        return self._sweeper_pid

    @property
    def direction(self) -> Optional[str]:
        """minimize or maximize; None for a multi-objective study."""
        return None if self._multi_objective else self._study.direction.name.lower()

    @property
    def number(self) -> int:
        return self._trial.number

    @property
    def study_name(self) -> str:
        return self._study.study_name

    def report(self, value: float, step: int) -> None:
        """Record the eval metric at `step` (training steps, so pruner settings read naturally)."""
        # Optuna rejects intermediate values of multi-objective studies and of closed trials.
        if self._multi_objective or self._finished_elsewhere or not self._writes:
            return
        import optuna

        try:
            self._trial.report(float(value), int(step))
        except optuna.exceptions.UpdateFinishedTrialError:
            # The sweeper already closed this trial (it was stopped or declared lost).
            self._finished_elsewhere = True

    def should_prune(self) -> bool:
        """True when the pruner says stop, or when nobody is waiting for this trial any more."""
        if self._finished_elsewhere:
            return True
        if self._sweeper_pid is not None and not pid_alive(self._sweeper_pid):
            log.warning("the sweeper (pid %d) is gone; stopping this trial", self._sweeper_pid)
            return True
        if self._multi_objective:
            return False
        return self._trial.should_prune()


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def watch_sweeper(pid: int, interval_s: float = 1.0) -> threading.Thread:
    """Stop this trial (SIGTERM: checkpoint, then exit) once the sweeper that started it is gone,
    wherever the kernel cannot be asked to do it (Linux's parent-death signal does it at once)."""
    def watch() -> None:
        while pid_alive(pid):
            time.sleep(interval_s)
        log.warning("the sweeper (pid %d) is gone; stopping this trial", pid)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="watch-sweeper", daemon=True)
    thread.start()
    return thread
