"""The real train.py under the sweeper: two smoke-sized trials, TPE, median pruning."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

from apps.sweep_helpers import REPO, load_study, sweep_env


@pytest.mark.slow
def test_train_py_sweep_with_pruning(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), "-m", "hydra/sweeper=optuna",
         "hydra/sweeper/sampler=tpe", "hydra/sweeper/pruner=median",
         "hydra.sweeper.pruner.n_startup_trials=1", "hydra.sweeper.n_trials=2",
         "hydra.sweeper.seed=0", "optim.lr=tag(log,interval(1e-4,1e-2))",
         "clip=choice(0.5,1.0,2.0)", "debug=smoke", f"hydra.sweep.dir={tmp_path}",
         "hydra.sweeper.tensorboard=false"],
        cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = load_study(tmp_path).trials
    assert len(trials) == 2 and trials[0].state == TrialState.COMPLETE, [
        (t.state, t.user_attrs.get("reason")) for t in trials]
    assert trials[1].state in (TrialState.COMPLETE, TrialState.PRUNED)
    for t in trials:
        assert t.intermediate_values, "the training loop reported its evals to the study"
        summary = json.loads((tmp_path / str(t.number) / "summary.json").read_text())
        assert summary["status"] == {"COMPLETE": "completed", "PRUNED": "pruned"}[t.state.name]
    assert trials[0].values == [json.loads((tmp_path / "0" / "summary.json").read_text())["objective"]]
    assert (tmp_path / "optimization_history.png").exists()


@pytest.mark.slow
def test_train_py_sweep_scores_its_best_trial_on_the_held_out_test_split(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "train.py"), "-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=grid",
         "optim.lr=choice(1e-3,1e-2)", "model=mlp", "data=synthetic", "data.test_fraction=0.1", "debug=smoke",
         f"hydra.sweep.dir={tmp_path}", "hydra.sweeper.plots=false", "hydra.sweeper.tensorboard=false"],
        cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = load_study(tmp_path)
    best, scores = study.best_trial, study.user_attrs["best_trial_test"]
    report = json.loads((tmp_path / str(best.number) / "eval.json").read_text())  # mode=eval with the trial's overrides
    trained = json.loads((tmp_path / str(best.number) / "summary.json").read_text())
    assert trained["test_samples"] == int(0.1 * (4096 + 1024))  # what training held out, and never read
    assert report["checkpoint"].endswith("best.pt") and report["test_samples"] == 16  # debug=smoke: 2 batches of 8
    assert scores == {"trial": best.number, **{k: report[k] for k in ("checkpoint", "step", "test_samples",
                                                                      "test_loss", "test_accuracy")}}
    assert [p.parent.name for p in tmp_path.glob("*/eval.json")] == [str(best.number)]
