"""mode=eval: a trained checkpoint scored on the whole validation split, and on a test split where the
data holds one, the run left untouched."""
from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT, compose_cfg, one_line_error, run_cli
from harness.state.checkpoint import load_checkpoint
from harness.config.run_config import validate_config
from harness.data import build_splits, validate_data_config
from harness.core.errors import ConfigError
from harness.models import build_model, model_spec

RUN = ["model=mlp", "data=synthetic", "model.width=32", "data.n_val=300", "trainer.max_steps=40",
       "trainer.eval_every=20", "trainer.ckpt_every=20", "logger=none", "diagnose=false", "batch_size=32"]


def snapshot(run_dir):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.rglob("*") if p.is_file() and p.name != ".lock"}


@pytest.mark.trajectory
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
    assert report["val_samples"] == 300  # all of them, not trainer.eval_batches' sample
    assert 0 < report["val_loss"] < 3 and 0 <= report["val_accuracy"] <= 1
    assert f"on all 300 validation samples: loss {report['val_loss']:.4f}" in result.stdout + result.stderr
    assert report["test_samples"] is None and "test_loss" not in report  # data=synthetic holds none by default
    assert "no test split: data=synthetic holds none" in result.stdout + result.stderr
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
    assert report["val_samples"] == 64 and report["val_loss"] == summary["final_val_loss"]


def test_a_checkpoint_of_another_model_is_refused_in_one_line_naming_both_and_nothing_is_written(tmp_path):
    """Scoring a checkpoint with a config that builds another model (a remedy's attempt scored with the
    run's own overrides, a mistyped width) would load the wrong modules: one line, exit 2, nothing written."""
    run_dir = tmp_path / "run"
    assert run_cli([*RUN, "trainer.max_steps=4", f"hydra.run.dir={run_dir}"]).returncode == 0
    before = snapshot(run_dir)
    result = run_cli(["mode=eval", "model.width=48", "activation_swap=gelu", f"hydra.run.dir={run_dir}"])
    line = one_line_error(result, "eval.checkpoint")
    assert "model.width: 32 in the checkpoint, 48 here" in line and "activation_swap: None in the checkpoint" in line
    assert snapshot(run_dir) == before  # no eval.json, no eval.log
    # on purpose: the same parameters read by a model built another way are scored, the difference logged
    allowed = run_cli(["mode=eval", "activation_swap=gelu", "eval.other_model=true", f"hydra.run.dir={run_dir}"])
    assert allowed.returncode == 0, allowed.stderr[-2000:]
    assert "trained with another model (activation_swap: None in the checkpoint" in allowed.stdout + allowed.stderr
    assert (run_dir / "eval.json").is_file()


REMEDIED = ["model=mlp", "data=synthetic", "~model.depth", "~model.activation", "~model.norm", "~model.residual",
            "~model.dropout", "~model.width", "model._target_=tests.remedy_models.SigmoidHeadRegressor",
            "data.task=regression", "trainer.max_steps=150", "diagnose.remedy=auto", "diagnose.report=false",
            "logger=none"]


@pytest.mark.trajectory
def test_eval_after_a_remedy_scores_the_runs_result_and_each_attempt_with_its_own_config(tmp_path):
    """A remedied run dir holds no checkpoint of its own: mode=eval there scores its result (the
    best attempt, built with that attempt's remedies), an attempt dir scores itself, and an
    explicit checkpoint of an attempt is built as that attempt was. The remedy here replaces the
    model's output activation, so the run's own config would build another model."""
    run_dir = tmp_path / "run"
    trained = run_cli([*REMEDIED, f"hydra.run.dir={run_dir}"])
    assert trained.returncode == 0, trained.stderr[-2000:]
    story = json.loads((run_dir / "attempts.json").read_text())
    best = story["attempts"][story["best_attempt"] - 1]
    assert story["verdict"] == "healed" and "output_activation=identity" in best["overrides"]
    before = snapshot(run_dir)

    def scored(where, *extra):
        result = run_cli(["mode=eval", f"hydra.run.dir={where}", *extra])
        assert result.returncode == 0, result.stderr[-2000:]
        return json.loads((where / "eval.json").read_text())

    result = scored(run_dir)
    assert result["attempt"] == best["number"] and result["remedies"] == best["overrides"]
    assert result["checkpoint"] == str(run_dir / "attempts" / str(best["number"]) / "checkpoints" / "best.pt")
    assert scored(run_dir / "attempts" / str(best["number"]))["val_loss"] == result["val_loss"]
    first = scored(run_dir / "attempts" / "1")
    assert first["attempt"] == 1 and first["remedies"] == [] and first["val_loss"] > result["val_loss"]
    explicit = scored(run_dir, f"eval.checkpoint={run_dir / 'attempts' / '1' / 'checkpoints' / 'best.pt'}")
    assert explicit["attempt"] == 1 and explicit["val_loss"] == first["val_loss"]
    written = {"eval.json", "eval.log"}
    assert {p: v for p, v in snapshot(run_dir).items() if p.name not in written} == before

    missing = run_dir / "attempts" / str(len(story["attempts"]) + 1)
    line = one_line_error(run_cli(["mode=eval", f"hydra.run.dir={missing}"]), "hydra.run.dir")
    assert f"attempts/1 to attempts/{len(story['attempts'])}" in line and not missing.exists()


def test_eval_without_a_checkpoint_is_one_line(tmp_path):
    line = one_line_error(run_cli(["mode=eval", *RUN, f"hydra.run.dir={tmp_path / 'none'}"]), "eval.checkpoint")
    assert "holds no best checkpoint" in line


@pytest.mark.parametrize("override,key", [("eval.batches=half", "eval.batches"),
                                          ("eval.checkpoint=null", "eval.checkpoint"),
                                          ("eval.checkpoint=true", "eval.checkpoint")])
def test_bad_eval_keys_are_refused_by_the_config_checks(override, key):
    with pytest.raises(ConfigError) as err:
        validate_config(compose_cfg(["mode=eval", *RUN, override]))
    assert err.value.key == key


def test_a_bad_eval_key_is_one_line_and_leaves_no_run_dir(tmp_path):
    line = one_line_error(run_cli(["mode=eval", *RUN, "eval.batches=0", f"hydra.run.dir={tmp_path / 'x'}"]),
                          "eval.batches")
    assert "an integer >= 1" in line and not (tmp_path / "x").exists()


CUSTOM = ["model=mlp", "model.width=16", "data=custom", "data.task=classification", "trainer.max_steps=30",
          "trainer.eval_every=10", "logger=none", "diagnose=false", "batch_size=32"]


def test_custom_data_with_a_test_split_is_scored_on_it_as_an_independent_evaluation_does(tmp_path):
    run_dir = tmp_path / "run"
    args = [*CUSTOM, "data._target_=user_code.pairs_with_test"]
    trained = run_cli([*args, f"hydra.run.dir={run_dir}"], cwd=ROOT / "tests")
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert json.loads((run_dir / "summary.json").read_text())["test_samples"] == 96
    result = run_cli(["mode=eval", f"hydra.run.dir={run_dir}"], cwd=ROOT / "tests")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((run_dir / "eval.json").read_text())
    assert report["val_samples"] == 64 and report["test_samples"] == 96
    assert report["test_loss"] != report["val_loss"]

    # the best checkpoint's weights, scored on the test tensors by hand
    splits = build_splits(validate_data_config(compose_cfg(args).data))
    model = build_model(model_spec(compose_cfg(args).model), splits.meta)
    model.load_state_dict(load_checkpoint(run_dir / "checkpoints" / "best.pt")["model"])
    x, y = splits.test.tensors
    as_dict = build_splits(validate_data_config(compose_cfg([*args, "+data.as_dict=true"]).data)).test  # the factory's dict form
    assert all(torch.equal(a, b) for a, b in zip(as_dict.tensors, splits.test.tensors))
    with torch.no_grad():
        logits = model.eval()(x)
    assert report["test_loss"] == pytest.approx(F.cross_entropy(logits, y).item(), rel=1e-5)
    assert report["test_accuracy"] == pytest.approx((logits.argmax(1) == y).float().mean().item())
    assert (f"; on all 96 test samples: loss {report['test_loss']:.4f}, accuracy {report['test_accuracy']:.4f}"
            in result.stdout + result.stderr)


def test_a_test_fraction_holds_out_the_tail_of_training_and_leaves_val_as_it_was(tmp_path):
    plain = build_splits(validate_data_config(compose_cfg(["data=synthetic"]).data))
    zero = build_splits(validate_data_config(compose_cfg(["data=synthetic", "data.test_fraction=0"]).data))
    held = build_splits(validate_data_config(compose_cfg(["data=synthetic", "data.test_fraction=0.1"]).data))
    assert zero.test is None and held.test is not None
    assert torch.equal(zero.train.x, plain.train.x) and torch.equal(zero.val.x, plain.val.x)
    assert torch.equal(held.val.x, plain.val.x) and torch.equal(held.val.y, plain.val.y)
    assert len(held.test) == int(0.1 * (4096 + 1024)) == 4096 - len(held.train)
    assert torch.equal(torch.cat([held.train.x, held.test.x]), plain.train.x)  # train | test = the old train

    digits = ["data=digits", "model=mlp"]
    plain, zero, held = (build_splits(validate_data_config(compose_cfg([*digits, *extra]).data))
                         for extra in ([], ["data.test_fraction=0"], ["data.test_fraction=0.1"]))
    assert torch.equal(zero.train.images, plain.train.images) and torch.equal(zero.val.x, plain.val.x)
    assert torch.equal(held.val.y, plain.val.y)  # the same validation images (standardised by the new train's stats)
    assert (len(held.train), len(held.test)) == (1797 - 359 - 179, 179)
    assert torch.equal(torch.cat([held.train.labels, held.test.y]), plain.train.labels)

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}: the quick brown fox\n" for i in range(400)))
    text = ["data=text", f"data.path={corpus}", "model.block_size=16"]
    plain, held = (build_splits(validate_data_config(compose_cfg([*text, *extra]).data))
                   for extra in ([], ["data.test_fraction=0.2"]))
    ids = lambda windows: np.asarray(windows.tokens).tolist()  # noqa: E731
    assert plain.test is None and ids(held.val) == ids(plain.val)
    assert ids(held.train) + ids(held.test) == ids(plain.train)  # contiguous: train, test, val
    assert len(held.test.tokens) == int(0.2 * len(corpus.read_text()))


@pytest.mark.trajectory
def test_eval_scores_the_test_fraction_of_built_in_data(tmp_path):
    run_dir = tmp_path / "run"
    trained = run_cli([*RUN, "data.test_fraction=0.1", f"hydra.run.dir={run_dir}"])
    assert trained.returncode == 0, trained.stderr[-2000:]
    result = run_cli(["mode=eval", f"hydra.run.dir={run_dir}"])  # the saved overrides carry test_fraction
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((run_dir / "eval.json").read_text())
    assert report["val_samples"] == 300 and report["test_samples"] == int(0.1 * (4096 + 300))
    assert 0 < report["test_loss"] < 3 and 0 <= report["test_accuracy"] <= 1


def test_hf_data_reads_the_test_split_it_is_told_to(tmp_path):
    datasets = pytest.importorskip("datasets", reason="the hf extra is not installed")
    rows = {split: {"x": [[float(i + k)] * 4 for i in range(n)], "label": [i % 3 for i in range(n)]}
            for k, (split, n) in enumerate((("train", 90), ("validation", 30), ("test", 40)))}
    datasets.DatasetDict({name: datasets.Dataset.from_dict(r) for name, r in rows.items()}).save_to_disk(
        str(tmp_path / "ds"))
    hf = ["data=hf", f"data.path={tmp_path / 'ds'}", "data.task=classification", "data.input_key=x",
          "data.num_classes=3", "data.val_split=validation"]
    plain = build_splits(validate_data_config(compose_cfg(hf).data))
    held = build_splits(validate_data_config(compose_cfg([*hf, "data.test_split=test"]).data))
    assert plain.test is None and (len(held.train), len(held.val), len(held.test)) == (90, 30, 40)
    x, _ = held.test.gather(torch.arange(40))
    assert x[:, 0].tolist() == [float(i + 2) for i in range(40)]  # the test split's rows, not another's
    with pytest.raises(ConfigError) as err:
        build_splits(validate_data_config(compose_cfg([*hf, "data.test_split=holdout"]).data))
    assert err.value.key == "data.test_split" and "['train', 'validation', 'test']" in str(err.value)


# a corpus no edit of this project changes; lr 1e-2 moves the model off uniform, where bf16 and fp32 read alike
GPT_RUN = ["data=text", f"data.path={argparse.__file__}", "optim.lr=1e-2", "model.n_layer=1", "model.n_embd=16",
           "model.n_head=2", "model.block_size=16", "trainer.max_steps=10", "trainer.eval_every=10", "logger=none",
           "diagnose=false"]


def test_token_data_is_scored_on_non_overlapping_windows_with_progress_lines(tmp_path, caplog, monkeypatch):
    """Every token once by default (stride = context): the default run's validation split takes
    hundreds of batches, not tens of thousands; a line says how far it is."""
    from conftest import train
    from harness.modes import eval_mode
    from harness.modes.run import run

    train(GPT_RUN, tmp_path / "run")
    monkeypatch.setattr(eval_mode, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(eval_mode, "HINT_AFTER_S", 0.0)
    caplog.set_level("INFO", logger="harness")
    run(compose_cfg([*GPT_RUN, "mode=eval"]), run_dir=tmp_path / "run")
    scored = json.loads((tmp_path / "run" / "eval.json").read_text())
    windows = len(validate_and_build_val(GPT_RUN))
    assert scored["stride"] == 16 and scored["val_samples"] == -(-windows // 16)
    assert "eval: validation batch" in caplog.text and "left" in caplog.text
    assert caplog.text.count("precision=bf16 batch_size=128 scores faster") == 1  # once, and only in fp32
    assert scored["precision"] == "fp32" and scored["micro_batch"] == 32
    run(compose_cfg([*GPT_RUN, "mode=eval", "eval.stride=1", "eval.batches=3"]), run_dir=tmp_path / "run")
    assert json.loads((tmp_path / "run" / "eval.json").read_text())["stride"] == 1
    # the faster form: recorded as what scored it, and within bf16's rounding of the fp32 number
    hints = caplog.text.count("precision=bf16 batch_size=128 scores faster")
    run(compose_cfg([*GPT_RUN, "mode=eval", "precision=bf16", "batch_size=64"]), run_dir=tmp_path / "run")
    fast = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert fast["precision"] == "bf16" and fast["micro_batch"] == 64 and fast["val_samples"] == scored["val_samples"]
    assert fast["val_loss"] == pytest.approx(scored["val_loss"], rel=1e-2) and fast["val_loss"] != scored["val_loss"]
    assert "(step 10) in bf16 on all" in caplog.text
    assert caplog.text.count("precision=bf16 batch_size=128 scores faster") == hints  # none in bf16


def validate_and_build_val(overrides):
    config = validate_config(compose_cfg(overrides))
    return build_splits(config.data).val


def test_ctrl_c_during_eval_is_one_line_with_exit_130_and_writes_nothing(tmp_path, monkeypatch):
    from conftest import train
    from harness.core.errors import Interrupted
    from harness.loop.evaluation import Evaluator
    from harness.modes.run import run

    train(GPT_RUN, tmp_path / "run")

    def interrupted(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(Evaluator, "evaluate", interrupted)
    with pytest.raises(Interrupted, match="mode=eval stopped by Ctrl-C; nothing was written") as stopped:
        run(compose_cfg([*GPT_RUN, "mode=eval"]), run_dir=tmp_path / "run")
    assert stopped.value.exit_status == 130 and not (tmp_path / "run" / "eval.json").exists()


def test_a_remedied_run_still_running_its_remedies_names_the_attempt_dirs_to_score(tmp_path):
    from harness.remedy.story import Attempt, Story, remedied_attempt, save_story

    save_story(tmp_path, Story(3, [Attempt(1, [], "as given"), Attempt(2, ["clip=1.0"], "from scratch", base=1)]))
    with pytest.raises(ConfigError, match="attempt 2 has not .resume=auto finishes it"):
        remedied_attempt(tmp_path)
    folder, attempt = remedied_attempt(tmp_path / "attempts" / "2")
    assert folder == tmp_path / "attempts" / "2" and attempt.overrides == ["clip=1.0"]
    assert remedied_attempt(tmp_path / "attempts") is None and remedied_attempt(tmp_path / "elsewhere") is None
