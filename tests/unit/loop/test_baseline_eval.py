"""Every fresh run measures where it starts: one eval of the untrained model before the first
update, in metrics.jsonl (a `baseline` row of `initial/...` values no rule reads as an eval) and
summary.json (`initial_val_*`), for the built-in loss, an objective's parts and metrics alike; it
leaves the training exactly as it was, and a resume keeps the first start's."""
from __future__ import annotations

import json

import pytest

from conftest import train
from harness.loop.callbacks.baseline import Baseline

RUN = ["model=mlp", "data=synthetic", "trainer.max_steps=12", "trainer.eval_every=6", "trainer.log_every=3",
       "logger=none", "diagnose=false"]


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]


def test_the_untrained_eval_is_recorded_and_changes_nothing_of_the_training(tmp_path, monkeypatch):
    _, summary = train(RUN, tmp_path / "run")
    first = rows(tmp_path / "run")[0]
    assert first["step"] == 0 and first["kind"] == "baseline"
    assert set(first) == {"step", "kind", "initial/val/loss", "initial/val/accuracy"}
    assert summary["initial_val_loss"] == first["initial/val/loss"] > summary["best_val_loss"]
    assert summary["initial_val_accuracy"] == first["initial/val/accuracy"]
    monkeypatch.setattr(Baseline, "on_fit_start", lambda self, trainer: None)
    train(RUN, tmp_path / "without")
    losses = [[r.get("train/loss") for r in rows(d) if r["kind"] == "train"] for d in (tmp_path / "run", tmp_path / "without")]
    assert losses[0] == losses[1]  # bit for bit: the RNG streams were forked around it


def test_a_resume_keeps_the_first_starts_baseline_and_measures_none_again(tmp_path):
    _, stopped = train([*RUN, "trainer.stop_after=6"], tmp_path / "run")
    _, resumed = train([*RUN, "resume=auto"], tmp_path / "run")
    assert resumed["initial_val_loss"] == stopped["initial_val_loss"]
    assert [r["kind"] for r in rows(tmp_path / "run")].count("baseline") == 1


def test_an_objectives_parts_and_metrics_have_their_baseline(tmp_path):
    pytest.importorskip("sklearn", reason="data=digits needs the optional vision extra")
    _, summary = train(["data=digits", "model._target_=user_code.TinyVAE", "loss._target_=user_code.vae_loss",
                        "trainer.max_steps=6", "trainer.eval_every=3", "logger=none", "diagnose=false"],
                       tmp_path / "run")
    assert {"initial_val_loss", "initial_val_loss_recon", "initial_val_loss_kl"} <= set(summary)
    assert summary["initial_val_loss"] == pytest.approx(summary["initial_val_loss_recon"]
                                                        + summary["initial_val_loss_kl"], rel=1e-5)
