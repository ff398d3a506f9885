"""mode=eval: a trained checkpoint scored on the whole validation split, the run left untouched."""
from __future__ import annotations

import json

from conftest import one_line_error, run_cli
from harness.checkpoint import load_checkpoint

RUN = ["model=mlp", "data=synthetic", "model.width=32", "data.n_val=300", "trainer.max_steps=40",
       "trainer.eval_every=20", "trainer.ckpt_every=20", "logger=none", "diagnose=false", "batch_size=32"]


def snapshot(run_dir):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}


def test_eval_scores_best_on_every_validation_sample_and_touches_nothing_of_the_run(tmp_path):
    run_dir = tmp_path / "run"
    trained = run_cli([*RUN, f"hydra.run.dir={run_dir}"])
    assert trained.returncode == 0, trained.stderr[-2000:]
    before = snapshot(run_dir)
    result = run_cli(["mode=eval", f"hydra.run.dir={run_dir}"])  # the run's own overrides are reused
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((run_dir / "eval.json").read_text())
    best = load_checkpoint(run_dir / "checkpoints" / "best.pt")
    assert report["checkpoint"].endswith("best.pt") and report["step"] == best["step"]
    assert report["split"] == "val" and report["samples"] == 300  # all of them, not trainer.eval_batches' sample
    assert 0 < report["val_loss"] < 3 and 0 <= report["val_accuracy"] <= 1
    assert f"on all 300 validation samples: loss {report['val_loss']:.4f}" in result.stdout + result.stderr
    after = snapshot(run_dir)
    assert {p: v for p, v in after.items() if p.name not in ("eval.json", "eval.log")} == before

    last = run_cli(["mode=eval", "eval.checkpoint=last", f"hydra.run.dir={run_dir}"])
    assert last.returncode == 0, last.stderr[-2000:]
    assert json.loads((run_dir / "eval.json").read_text())["step"] == 40


def test_eval_of_the_last_step_matches_the_models_own_loss(tmp_path):
    """The number is the model's: the same loss as the trained weights give by hand."""
    run_dir = tmp_path / "run"
    assert run_cli([*RUN, "data.n_val=64", "trainer.eval_batches=2", f"hydra.run.dir={run_dir}"]).returncode == 0
    result = run_cli(["mode=eval", "eval.checkpoint=last", f"hydra.run.dir={run_dir}"])
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    report = json.loads((run_dir / "eval.json").read_text())
    # 64 samples = the 2 eval batches of 32 training scored at its last step: the same samples, the same weights
    assert report["samples"] == 64 and report["val_loss"] == summary["final_val_loss"]


def test_eval_without_a_checkpoint_is_one_line(tmp_path):
    line = one_line_error(run_cli(["mode=eval", *RUN, f"hydra.run.dir={tmp_path / 'none'}"]), "eval.checkpoint")
    assert "holds no best checkpoint" in line


def test_bad_eval_keys_are_one_line(tmp_path):
    for override, key in (("eval.batches=0", "eval.batches"), ("eval.batches=half", "eval.batches"),
                          ("eval.checkpoint=null", "eval.checkpoint"), ("eval.checkpoint=true", "eval.checkpoint")):
        line = one_line_error(run_cli(["mode=eval", *RUN, override, f"hydra.run.dir={tmp_path / 'x'}"]), key)
        assert "is invalid" in line, line
    assert not (tmp_path / "x").exists()
