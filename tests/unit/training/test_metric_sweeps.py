"""A sweep whose direction contradicts its objective's is refused before any trial trains (the sweep
that maximises F1 is docs/bring-your-own.md's Example 9, run by tests/e2e/test_readme_byo.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from apps.sweep_helpers import REPO, sweep_env

TAGGER = ["model=mlp", "data=custom", "data._target_=tests.user_code.tagger", "data.task=regression",
          "loss.function=bce", "model._target_=tests.user_code.Regressor", "~model.depth", "~model.activation",
          "~model.norm", "~model.residual", "~model.dropout", "~model.width", "trainer.max_steps=30",
          "trainer.eval_every=10", "trainer.log_every=10", "trainer.eval_batches=7", "diagnose=false",
          "+metrics.f1._target_=torchmetrics.classification.MultilabelF1Score", "+metrics.f1.num_labels=5",
          "trainer.monitor=val/f1", "logger=none"]


def _sweep(sweep_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "train.py"), "-m", "hydra/sweeper=optuna",
                           "hydra/sweeper/sampler=grid", f"hydra.sweep.dir={sweep_dir}", "hydra.sweeper.plots=false",
                           "hydra.sweeper.tensorboard=false", *TAGGER, *overrides],
                          cwd=REPO, env=sweep_env(), capture_output=True, text=True, timeout=600)


def test_a_direction_against_the_objectives_is_refused_before_any_trial_trains(tmp_path):
    proc = _sweep(tmp_path, "optim.lr=choice(1e-3)")  # direction minimize (the default) against F1's max
    assert proc.returncode != 0
    assert "hydra.sweeper.direction=maximize" in proc.stdout + proc.stderr
    assert not list(tmp_path.glob("*/checkpoints/*.pt"))
