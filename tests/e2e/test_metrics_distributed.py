"""Metrics under torchrun (gloo, 2 processes): an odd validation split is scored once per sample, every
rank's state reduced, so the logged F1 and function metrics equal scikit-learn's over the whole split."""
from __future__ import annotations

import json

import pytest
import torch
from sklearn.metrics import f1_score

from conftest import run_dirs, torchrun
from user_code import Regressor, tagger

TAGGER = ["model=mlp", "data=custom", "data._target_=tests.user_code.tagger", "data.task=regression",
          "loss.function=bce", "model._target_=tests.user_code.Regressor", "~model.depth", "~model.activation",
          "~model.norm", "~model.residual", "~model.dropout", "~model.width", "trainer.max_steps=30",
          "trainer.eval_every=15", "trainer.log_every=15", "trainer.eval_batches=7", "optim.lr=3e-3",
          "diagnose=false", "logger=none", "+metrics.f1._target_=torchmetrics.classification.MultilabelF1Score",
          "+metrics.f1.num_labels=5", "+metrics.found._target_=tests.user_code.positives_found",
          "+metrics.found.higher_is_better=true", "trainer.monitor=val/f1"]


def test_two_ranks_log_the_metrics_of_the_whole_odd_split(tmp_path):
    torchrun(TAGGER, cwd=tmp_path)
    (run_dir,) = run_dirs(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    model = Regressor(8, 5)
    model.load_state_dict(torch.load(run_dir / "checkpoints" / "step_00000030.pt")["model"])
    _, val = tagger()
    with torch.no_grad():
        logits, labels = model(val.tensors[0]), val.tensors[1]
    assert summary["eval_samples"] == 201
    assert summary["final_val_f1"] == pytest.approx(
        f1_score(labels.numpy(), (logits > 0).numpy(), average="macro", zero_division=0), abs=1e-5)
    positive = labels > 0.5
    assert summary["final_val_found"] == pytest.approx(float(((logits > 0) & positive).sum() / positive.sum()),
                                                       abs=1e-6)
    assert summary["monitor"]["best_step"] in (15, 30)
