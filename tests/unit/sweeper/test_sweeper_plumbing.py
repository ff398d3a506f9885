"""The plumbing around a trial process: how its exit and summary.json become an Optuna verdict,
how its command line is rebuilt from the sweep's Hydra config, where the study is stored.
Pure functions: nothing is launched."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import pytest
from omegaconf import OmegaConf
from optuna.trial import TrialState

from harness.launch.app import app_command
from hydra_plugins.harness_optuna_sweeper._outcome import judge
from hydra_plugins.harness_optuna_sweeper._settings import parse_settings
from hydra_plugins.harness_optuna_sweeper._study import storage_url
from hydra_plugins.harness_optuna_sweeper.optuna_sweeper import OptunaSweeper
from harness.launch.runner import AppCommand, ProcessResult, TrialRunner, TrialSpec


def outcome(tmp_path: Path, summary: Optional[dict[str, Any]], exit_code: Optional[int] = 0,
            killed: Optional[str] = None, log: str = "", n_objectives: int = 1):
    if summary is not None:
        (tmp_path / "summary.json").write_text(json.dumps(summary))
    (tmp_path / "trial.log").write_text(log)
    result = ProcessResult(exit_code=exit_code, killed=killed, started_at=0.0, ended_at=3.0,
                           log_path=tmp_path / "trial.log")
    return judge(result, tmp_path, n_objectives)


def test_completed_run_gives_its_objective(tmp_path: Path) -> None:
    got = outcome(tmp_path, {"status": "completed", "objective": 1.5})
    assert (got.state, got.values, got.reason) == (TrialState.COMPLETE, [1.5], None)
    got = outcome(tmp_path, {"status": "completed", "objective": [1.5, 2]}, n_objectives=2)
    assert got.values == [1.5, 2.0]


@pytest.mark.parametrize("summary, exit_code, killed, log, state, reason", [
    ({"status": "pruned", "reason": "pruned at step 200"}, 0, None, "", TrialState.PRUNED,
     "pruned at step 200"),
    ({"status": "completed", "objective": float("nan")}, 0, None, "", TrialState.FAIL,
     "objective is NaN"),
    ({"status": "completed", "objective": None}, 0, None, "", TrialState.FAIL,
     "objective is null: the run produced no finite value"),
    ({"status": "completed", "objective": [1.0]}, 0, None, "", TrialState.FAIL,
     "objective has 1 value(s) but hydra.sweeper.direction has 2"),
    ({"status": "diverged", "reason": "loss is NaN at step 40"}, 0, None, "", TrialState.FAIL,
     "diverged: loss is NaN at step 40"),
    (None, 1, None, "Traceback\nValueError: boom\n\nSet the environment variable "
     "HYDRA_FULL_ERROR=1 for a complete stack trace.\n", TrialState.FAIL,
     "exit code 1: ValueError: boom"),
    (None, 2, None, "error: optim.lr=-1.0 is invalid: > 0\n", TrialState.FAIL,
     "exit code 2: error: optim.lr=-1.0 is invalid: > 0"),
    (None, 0, None, "", TrialState.FAIL, "exit code 0 but no valid summary.json in the run dir"),
    (None, None, "interrupted", "", TrialState.FAIL, "interrupted"),
    (None, None, "timeout", "", TrialState.FAIL, "timeout: killed after 3 s"),
])
def test_every_failure_has_a_reason(tmp_path: Path, summary: Optional[dict], exit_code: Optional[int],
                                    killed: Optional[str], log: str, state: TrialState,
                                    reason: str) -> None:
    n_objectives = 2 if summary and summary.get("objective") == [1.0] else 1
    got = outcome(tmp_path, summary, exit_code, killed, log, n_objectives)
    assert (got.state, got.reason) == (state, reason)


def test_trial_command_is_the_users_app_as_a_single_run(tmp_path: Path) -> None:
    cfg = OmegaConf.create({"hydra": {
        "runtime": {"cwd": str(tmp_path), "config_sources": [
            {"path": "pkg://hydra.conf", "schema": "pkg", "provider": "hydra"},
            {"path": "/repo/conf", "schema": "file", "provider": "main"},
            {"path": "/extra", "schema": "file", "provider": "command-line"},
        ]},
        "job": {"config_name": "train"},
        "overrides": {"hydra": [
            "hydra/sweeper=optuna", "hydra.sweeper.n_trials=20", "hydra/sweeper/sampler=tpe",
            "hydra.sweep.dir=multirun/x", "hydra.job.chdir=true", "hydra/job_logging=disabled",
        ]},
    }})
    app = app_command(cfg)
    assert app.args == ("--config-path=/repo/conf", "--config-dir=/extra", "--config-name=train",
                        "hydra.job.chdir=true", "hydra/job_logging=disabled", "hydra.mode=RUN")
    assert app.cwd == str(tmp_path)
    spec = TrialSpec(number=7, run_dir=tmp_path / "it's 7", overrides=("optim=sgd",), env={},
                     slot=1, n_slots=2)
    argv = TrialRunner().command(AppCommand("py", ("train.py",), app.args, app.cwd), spec)
    assert argv[:2] == ["py", "train.py"]
    assert argv[-3:] == ["optim=sgd", f"hydra.run.dir='{tmp_path}/it\\'s 7'", "hydra.job.num=7"]


def test_storage_defaults_to_the_sweep_dir_and_sqlite_paths_become_absolute(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def url(storage: Optional[str]) -> str:
        settings = parse_settings(dict(
            sampler={"name": "random"}, pruner={"name": "none"}, direction="minimize",
            n_trials=1, n_jobs=1, seed=None, storage=storage, study_name=None, params=None,
            plots=False, tensorboard=False, test_best=False))
        return storage_url(settings, tmp_path / "sweep")

    monkeypatch.chdir(tmp_path)
    assert url(None) == f"sqlite:///{tmp_path}/sweep/optuna.db"
    # A trial under hydra.job.chdir=true runs elsewhere and must find the same file.
    assert url("sqlite:///studies/lr.db") == f"sqlite:///{tmp_path}/studies/lr.db"
    assert url("postgresql://u:pw@db/optuna") == "postgresql://u:pw@db/optuna"


def test_a_launcher_offering_a_trial_runner_runs_the_trials() -> None:
    """How hydra/launcher=torchrun plugs in: the sweeper keeps its own scheduling and asks the
    launcher only for the runner of one trial."""

    class WrappingRunner(TrialRunner):
        def __init__(self, n_slots: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.n_slots = n_slots

    class OfferingLauncher:
        def trial_runner(self, n_slots: int, **kwargs: Any) -> TrialRunner:
            return WrappingRunner(n_slots, **kwargs)

    sweeper = OptunaSweeper(sampler=None, pruner=None, runner=TrialRunner(grace_s=3.0),
                            direction="minimize", n_trials=1, n_jobs=2, seed=None, storage=None,
                            study_name=None, params=None, plots=False, tensorboard=False,
                            test_best=False)
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher

    from harness.core.errors import ConfigError

    sweeper.launcher = BasicLauncher()  # Hydra's basic launcher offers nothing: trials run here
    assert sweeper.trial_runner(2) is sweeper.runner
    sweeper.launcher = object()  # a launcher that knows only Hydra's batches is refused, not ignored
    with pytest.raises(ConfigError, match="cannot drive this launcher"):
        sweeper.trial_runner(2)
    sweeper.launcher = OfferingLauncher()
    runner = sweeper.trial_runner(2)
    assert isinstance(runner, WrappingRunner) and runner.n_slots == 2 and runner.grace_s == 3.0
