"""MLflow (logger=mlflow): metrics at the steps TensorBoard gets them, the flattened resolved config
as params, the run's files as artifacts, and its end as the MLflow run status.

- The store defaults to a SQLite file beside the runs (`sqlite:///outputs/mlflow.db`): MLflow 3
  defaults to SQLite itself and refuses a plain `./mlruns` directory. Many machines share a
  server URI instead (http://..., or postgresql://... like the sweeps' storage).
- A sweep's trials are child runs of one parent run per sweep, filed under the study's name.
- MLflow cannot delete metric points, so a resumed run continues the same MLflow run and logs
  only the steps after the last one the store already holds: the steps between the checkpoint
  and a crash are trained again (bit-exactly, so with the values already stored) but not logged
  twice.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.logger.base import FAILED_STATUSES, KILLED_STATUSES, RunInfo, Sink
from harness.core.typed_config import setting

RUN_FILE = "mlflow_run.json"  # in the run dir: which MLflow run a resume continues
PARENT_FILE = "mlflow_parent.json"  # in a sweep dir: the sweep's parent run
DEFAULT_STORE = Path("outputs") / "mlflow.db"
BATCH = 1000  # metrics per log_batch call (MLflow's limit); params go 100 at a time
PARAM_CHARS = 6000  # MLflow's limit on a param value
ARTIFACTS = ("config.yaml", "summary.json", "report.md", "plots")


@dataclass(frozen=True)
class MLflowSettings:
    tracking_uri: str | None = setting(None, "null (sqlite:///outputs/mlflow.db) or a tracking URI: sqlite:///PATH, "
                                             "http://HOST:PORT, postgresql://...")
    experiment: str | None = setting(None, "null (the sweep's study name, or train) or an experiment name")


def default_uri() -> str:
    return f"sqlite:///{DEFAULT_STORE.resolve()}"


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """`{"optim": {"lr": 0.001}}` -> `{"optim.lr": "0.001"}` (MLflow params are strings)."""
    flat: dict[str, str] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
    return flat


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                             cwd=Path(__file__).resolve().parent)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _read_run_file(path: Path) -> dict[str, str]:
    """{"run_id", "tracking_uri"} as a run dir or sweep dir keeps them; {} when there is none."""
    return json.loads(path.read_text()) if path.is_file() else {}


def run_status(status: str) -> str:
    """summary.json's status as an MLflow run status."""
    if status in FAILED_STATUSES:
        return "FAILED"
    return "KILLED" if status in KILLED_STATUSES else "FINISHED"


@contextlib.contextmanager
def setting_up(uri: str) -> Iterator[None]:
    """One process at a time sets up in a SQLite store: the first creates its tables, and
    parallel sweep trials must not race it (MLflow's migrations are not concurrent-safe)."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    db = Path(uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db.with_name(db.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


class MLflowSink(Sink):
    def __init__(self, info: RunInfo, settings: MLflowSettings) -> None:
        self.uri, self.info = settings.tracking_uri or default_uri(), info
        with setting_up(self.uri):
            self._start(info, settings)

    def _start(self, info: RunInfo, settings: MLflowSettings) -> None:
        from mlflow import MlflowClient

        self.client = MlflowClient(tracking_uri=self.uri)
        self.client.search_experiments(max_results=1)  # the store's tables exist from here on
        self.logged_through = -1  # steps up to here are already in the store (a resumed run)
        earlier = _read_run_file(info.run_dir / RUN_FILE) if info.resume_step else {}
        if earlier.get("tracking_uri") == self.uri:
            self.run_id = earlier["run_id"]
            self.parent_id = self.client.get_run(self.run_id).data.tags.get("mlflow.parentRunId")
            self.client.update_run(self.run_id, status="RUNNING")
            self.logged_through = self._last_logged_step()
            return
        experiment = self._experiment(settings.experiment or info.study or "train")
        tags = {"seed": str(info.config.get("seed")), "status": "running"}
        if (commit := git_commit()) is not None:
            tags["git_commit"] = commit
        self.parent_id = None
        if info.study is not None:
            self.parent_id = self._parent_run(experiment)
            self.client.update_run(self.parent_id, status="RUNNING")  # the sweep goes on
            tags.update({"study": info.study, "trial": str(info.trial), "mlflow.parentRunId": self.parent_id})
        self.run_id = self.client.create_run(experiment, run_name=info.run_dir.name, tags=tags).info.run_id
        (info.run_dir / RUN_FILE).write_text(json.dumps({"run_id": self.run_id, "tracking_uri": self.uri}))
        self._log_params(flatten({k: v for k, v in info.config.items() if k != "hydra"}))

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        location = None
        if self.uri.startswith("sqlite:///"):  # artifacts beside the database, not in the working directory
            location = (Path(self.uri.removeprefix("sqlite:///")).parent / "mlartifacts" / name).as_uri()
        try:
            return self.client.create_experiment(name, artifact_location=location)
        except Exception:  # noqa: BLE001 - another trial created it first
            return self.client.get_experiment_by_name(name).experiment_id

    def _parent_run(self, experiment: str) -> str:
        """The sweep's parent run, made by the first trial (a lock in the sweep dir keeps it one,
        whatever the store)."""
        sweep_dir = self.info.sweep_dir
        with open(sweep_dir / f"{PARENT_FILE}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            path = sweep_dir / PARENT_FILE
            known = _read_run_file(path)
            if known.get("tracking_uri") == self.uri:
                return known["run_id"]
            run_id = self.client.create_run(experiment, run_name=self.info.study,
                                            tags={"study": self.info.study}).info.run_id
            path.write_text(json.dumps({"run_id": run_id, "tracking_uri": self.uri}))
            return run_id

    def _last_logged_step(self) -> int:
        run = self.client.get_run(self.run_id)
        steps = [m.step for key in run.data.metrics for m in self.client.get_metric_history(self.run_id, key)]
        return max(steps, default=-1)

    def _log_params(self, params: dict[str, str]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v[:PARAM_CHARS]) for k, v in params.items()]
        for start in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[start:start + 100])

    def log(self, step: int, scalars: dict[str, float], kind: str) -> None:
        from mlflow.entities import Metric

        if step <= self.logged_through:
            return
        now = int(time.time() * 1000)
        metrics = [Metric(key, float(value), now, step) for key, value in scalars.items()]
        for start in range(0, len(metrics), BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[start:start + BATCH])

    def finish(self, summary: dict[str, Any]) -> None:
        """The run's files as artifacts, its status as a tag and as the MLflow run status."""
        for name in ARTIFACTS:
            path = self.info.run_dir / name
            if path.is_dir():
                self.client.log_artifacts(self.run_id, str(path), artifact_path=name)
            elif path.is_file():
                self.client.log_artifact(self.run_id, str(path))
        self.client.set_tag(self.run_id, "status", summary.get("status", "failed"))
        self.client.set_terminated(self.run_id, status=run_status(summary.get("status", "failed")))
        if self.parent_id is not None:  # finished as far as this trial knows; the next trial reopens it
            self.client.set_terminated(self.parent_id, status="FINISHED")
