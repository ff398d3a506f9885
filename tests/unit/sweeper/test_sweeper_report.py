"""Result files of a sweep, rebuilt from its study by scripts/sweep_report.py. The studies are
written directly (no trial is run), the way the sweeper records its trials."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from apps.sweep_helpers import REPO, sweep_env
from harness.loop.callbacks.sweep_trial import open_storage
from hydra_plugins.harness_optuna_sweeper._report import best_line, display_url, write_report

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = {"optim.lr": FloatDistribution(1e-4, 1e-2, log=True),
         "optim": CategoricalDistribution(("adamw", "sgd"))}


def record(study: optuna.Study, n: int) -> None:
    """n trials as the sweeper leaves them: params, process times, summary, reason."""
    for i in range(n):
        trial = study.ask(SPACE)
        state = [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL][i % 4]
        values = [0.5 + 0.1 * i, 10.0 - i][: len(study.directions)]
        trial.set_user_attr("process", {"exit_code": 0, "started_at": 100.0 + i,
                                        "ended_at": 101.5 + i, "slot": i % 2})
        trial.set_user_attr("summary", {"status": "completed", "best_val_loss": values[0],
                                        "wall_time_s": 1.5, "steps": 100})
        trial.set_user_attr("reason", "objective is NaN" if state == TrialState.FAIL else None)
        trial.set_user_attr("overrides", [f"optim={trial.params['optim']}"])
        if state == TrialState.PRUNED and len(study.directions) == 1:
            trial.report(3.0, 10)
        study.tell(trial, values if state == TrialState.COMPLETE else None, state=state)


def test_sweep_report_regenerates_every_result_file(tmp_path: Path) -> None:
    study = optuna.create_study(storage=open_storage(f"sqlite:///{tmp_path / 'optuna.db'}"),
                                study_name="train-abc")
    record(study, 8)
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "sweep_report.py"), str(tmp_path)],
                          env=sweep_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "best trial 0" in proc.stdout

    summary = json.loads((tmp_path / "sweep_summary.json").read_text())
    assert summary["counts"] == {"COMPLETE": 4, "PRUNED": 2, "FAIL": 2, "done": 8, "interrupted": 0}
    assert summary["best_trial"]["number"] == 0
    assert summary["wall_time_s"] == 8.5  # first start (100) to last end (108.5)
    for key in ("optimization_history", "param_importances", "parallel_coordinate",
                "intermediate_values"):
        assert (tmp_path / summary["files"][key]).stat().st_size > 0
    with open(tmp_path / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["state"] for r in rows[:4]] == ["COMPLETE", "COMPLETE", "PRUNED", "FAIL"]
    assert rows[3]["reason"] == "objective is NaN"
    assert "| 0 (best) | COMPLETE |" in (tmp_path / "trials.md").read_text()
    tb_runs = sorted(p.name for p in (tmp_path / "tb_hparams").iterdir() if p.is_dir())
    assert tb_runs == [f"trial_{i:04d}" for i in range(8)]


def test_multi_objective_report_saves_the_pareto_front(tmp_path: Path) -> None:
    study = optuna.create_study(directions=["minimize", "minimize"])
    record(study, 4)
    summary = write_report(study, tmp_path, "sqlite:///:memory:", tensorboard=False)
    assert {t["number"] for t in summary["pareto_front"]} == {0, 1}
    assert (tmp_path / summary["files"]["pareto_front"]).stat().st_size > 0


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")  # set_metric_names
def test_report_calls_the_objective_by_its_metric_name(tmp_path: Path) -> None:
    study = optuna.create_study()
    study.set_metric_names(["best_val_loss"])
    record(study, 4)
    summary = write_report(study, tmp_path, "sqlite:///:memory:", plots=False)
    assert summary["metric_names"] == ["best_val_loss"]
    assert best_line(summary) == "best trial 0: best_val_loss 0.5 with optim=" + study.trials[0].params["optim"]
    with open(tmp_path / "trials.csv") as f:
        assert [float(r["best_val_loss"]) for r in csv.DictReader(f) if r["state"] == "COMPLETE"] == [0.5, 0.6]
    from tensorboard.backend.event_processing.event_multiplexer import EventMultiplexer

    runs = EventMultiplexer().AddRunsFromDirectory(str(tmp_path / "tb_hparams")).Reload()
    assert "best_val_loss" in runs.Runs()["trial_0000"]["scalars"]


def test_storage_password_never_reaches_the_files() -> None:
    shown = display_url("postgresql://sweeper:s3cret@db.internal:5432/optuna")
    assert "s3cret" not in shown and "db.internal" in shown
