"""metrics.NAME: measured at each eval, exact over the whole scored split (not a mean of batch values),
logged everywhere the loss is; trainer.monitor picks best.pt and stops early by any of them; the eval
sample does not depend on accum."""
from __future__ import annotations

import json
import math

import pytest
import torch
from sklearn.metrics import f1_score

from conftest import compose_cfg, one_line_error, run_cli, train
from harness.assembly.assemble import eval_batches
from harness.config.run_config import validate_config
from harness.core.distributed import DistInfo
from harness.core.errors import ConfigError
from harness.data import build_splits
from harness.data.loader import LoaderSettings
from harness.training.metrics.monitored import resolve_selection
from harness.modes.run import run
from harness.training.early_stop import EarlyStopConfig, EarlyStopping
from user_code import Regressor, label_agreement, positives_found, tagger

TAGGER = ["model=mlp", "data=custom", "data._target_=user_code.tagger", "data.task=regression", "loss.function=bce",
          "model._target_=user_code.Regressor", "~model.depth", "~model.activation", "~model.norm", "~model.residual",
          "~model.dropout", "~model.width", "trainer.max_steps=60", "trainer.eval_every=10", "trainer.log_every=10",
          "trainer.eval_batches=7", "optim.lr=3e-3", "diagnose=false"]  # 7 x 32 >= 201: the whole split
F1 = ["+metrics.f1._target_=torchmetrics.classification.MultilabelF1Score", "+metrics.f1.num_labels=5"]
FUNCTIONS = ["+metrics.agree._target_=user_code.label_agreement", "+metrics.agree.higher_is_better=true",
             "+metrics.found._target_=user_code.positives_found", "+metrics.found.higher_is_better=true"]


def _evals(run_dir):
    return [row for row in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())
            if "val/loss" in row]


def _logits(run_dir, checkpoint: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The model of a checkpoint on the whole validation split, as the user would compute it."""
    model = Regressor(8, 5)
    model.load_state_dict(torch.load(run_dir / "checkpoints" / checkpoint)["model"])
    _, val = tagger()
    with torch.no_grad():
        return model(val.tensors[0]), val.tensors[1]


def test_metrics_equal_scikit_learns_over_the_whole_odd_split_and_best_pt_is_the_best_f1(tmp_path):
    _, summary = train([*TAGGER, *F1, *FUNCTIONS, "trainer.monitor=val/f1"], tmp_path)
    evals = _evals(tmp_path)
    assert summary["eval_samples"] == 201 and len(evals) == 6
    assert all({"val/f1", "val/agree", "val/found", "val/label_accuracy"} <= set(row) for row in evals)
    best = max(evals, key=lambda row: row["val/f1"])
    assert summary["monitor"] == {"name": "val/f1", "mode": "max", "best": best["val/f1"], "best_step": best["step"]}
    assert summary["objective"] == summary["best_val_f1"] == best["val/f1"]  # the default objective follows the monitor
    logits, labels = _logits(tmp_path, "best.pt")
    assert torch.load(tmp_path / "checkpoints" / "best.pt")["step"] == best["step"]
    exact = f1_score(labels.numpy(), (logits > 0).numpy(), average="macro", zero_division=0)
    assert best["val/f1"] == pytest.approx(exact, abs=1e-5)
    batch_mean = sum(f1_score(labels[i:i + 32].numpy(), (logits[i:i + 32] > 0).numpy(), average="macro",
                              zero_division=0) for i in range(0, 201, 32)) / 7
    assert abs(batch_mean - exact) > 1e-3  # a mean of batch F1s would have been a different number
    agree = ((logits > 0) == (labels > 0.5)).float().mean()
    assert best["val/agree"] == pytest.approx(float(agree), abs=1e-6) == best["val/label_accuracy"]
    recall = ((logits > 0) & (labels > 0.5)).sum() / (labels > 0.5).sum()
    assert best["val/found"] == pytest.approx(float(recall), abs=1e-6)
    last_logits, _ = _logits(tmp_path, "step_00000060.pt")
    assert summary["final_val_f1"] == pytest.approx(
        f1_score(labels.numpy(), (last_logits > 0).numpy(), average="macro", zero_division=0), abs=1e-5)


def test_a_metric_under_the_users_own_objective_is_fed_what_inputs_picks(tmp_path):
    open_tagger = [o for o in TAGGER if not o.startswith(("data.task", "loss.function", "model=", "~model"))]
    _, summary = train([*open_tagger, "data.task=null", "model._target_=user_code.Tagger", "loss._target_=user_code.tag_loss", *F1,
                        "+metrics.f1.inputs=user_code.tag_pick"], tmp_path)
    logits, labels = _logits(tmp_path, "step_00000060.pt")
    assert summary["final_val_f1"] == pytest.approx(
        f1_score(labels.numpy(), (logits > 0).numpy(), average="macro", zero_division=0), abs=1e-5)


def test_token_data_logs_its_perplexity_and_classes_their_accuracy(tmp_path):
    _, lm = train(["debug=smoke"], tmp_path / "lm")
    row = _evals(tmp_path / "lm")[-1]
    assert row["val/perplexity"] == pytest.approx(math.exp(row["val/loss"]), rel=1e-6)
    assert lm["best_val_perplexity"] == pytest.approx(math.exp(lm["best_val_loss"]), rel=1e-6)
    _, classes = train(["model=mlp", "data=synthetic", "debug=smoke"], tmp_path / "mlp")
    assert "val/accuracy" in _evals(tmp_path / "mlp")[-1] and "val/perplexity" not in _evals(tmp_path / "mlp")[-1]


def test_early_stopping_follows_the_monitor_in_its_direction():
    stop = EarlyStopping(EarlyStopConfig(patience=2, min_delta=0.01), mode="max")
    assert [stop.update(v, 1.0) for v in (0.5, 0.6, 0.605, 0.7, 0.69, 0.695)] == [
        None, None, None, None, None, "early_stopped"]
    assert stop.best_value == 0.7
    assert stop.update(0.9, math.nan) == "diverged"  # the val loss alone diverges, whatever the monitor


def test_accum_and_ranks_score_the_same_validation_samples():
    samples = []
    for accum, world in ((1, 1), (2, 1), (4, 1), (2, 2)):
        config = validate_config(compose_cfg(["model=mlp", "data=synthetic", f"accum={accum}", "batch_size=32"]),
                                 world)
        val = build_splits(config.data).val
        micro = 32 // (accum * world)
        _, sample = eval_batches(config, val, config.data.recipe, LoaderSettings(), micro, DistInfo(0, 0, world))
        samples.append(sample)
    assert len(samples[0]) == 20 * 32 and all(torch.equal(samples[0], s) for s in samples[1:])


def test_accum_2_reads_the_val_loss_of_accum_1(tmp_path):
    base = ["model=mlp", "data=synthetic", "trainer.max_steps=20", "trainer.eval_every=10", "diagnose=false"]
    _, one = train([*base, "accum=1"], tmp_path / "one")
    _, two = train([*base, "accum=2"], tmp_path / "two")
    assert one["eval_samples"] == two["eval_samples"] == 640
    assert two["final_val_loss"] == pytest.approx(one["final_val_loss"], rel=1e-5)


@pytest.mark.parametrize("overrides, key, allowed", [
    (["+metrics.f1=3"], "metrics.f1", "a node with a _target_"),
    (["+metrics.loss._target_=user_code.label_agreement"], "metrics.loss", "not one the harness logs itself"),
    (["+metrics.agree._target_=user_code.label_agreement", "trainer.monitor=val/agree"], "trainer.monitor_mode",
     "which way val/agree is better is not known"),
    (["trainer.monitor=val/f2", *F1], "trainer.monitor", "a value this run logs at each eval"),
    (["+metrics.f1._target_=no_such_module.F1"], "metrics.f1._target_", "an importable class or function"),
    (["+metrics.agree._target_=user_code.label_agreement", "+metrics.agree.higher_is_better=maybe"],
     "metrics.agree.higher_is_better", "true or false"),
    (["objective=best_val_f2"], "objective", "best_val_NAME"),
    (["trainer.monitor=loss"], "trainer.monitor", "val/NAME"),
    (["trainer.monitor_mode=up"], "trainer.monitor_mode", "min or max"),
])
def test_a_bad_metric_or_monitor_setting_is_one_line(overrides, key, allowed):
    with pytest.raises(ConfigError) as err:
        validate_config(compose_cfg([*TAGGER, *overrides]))
    assert err.value.key == key and allowed in str(err.value)


@pytest.mark.parametrize("overrides, key, allowed", [
    (["+metrics.f1._target_=torchmetrics.classification.MultilabelF1Score", "+metrics.f1.classes=5"],
     "metrics.f1._target_", "a metric that builds"),
    (["+metrics.f1._target_=torchmetrics.classification.MultilabelF1Score", "+metrics.f1.num_labels=3"],
     "metrics.f1._target_", "a metric that runs on the output"),
    (["+metrics.bad._target_=user_code.tag_pick"], "metrics.bad._target_", "a function metric returning a 0-dim"),
    (["trainer.monitor=val/accuracy"], "trainer.monitor", "a value this run logs at each eval"),
])
def test_a_monitor_never_logged_or_a_metric_that_cannot_run_is_refused_before_training(tmp_path, overrides, key,
                                                                                        allowed):
    result = run_cli([*(o.replace("user_code.", "tests.user_code.") for o in TAGGER), *(
        o.replace("user_code.", "tests.user_code.") for o in overrides), f"hydra.run.dir={tmp_path / 'run'}"],
        cwd=tmp_path)
    assert allowed in one_line_error(result, key)
    assert not (tmp_path / "run").exists()


def test_a_sweep_direction_against_the_monitors_is_refused():
    logged = {"val/loss": "min", "val/f1": "max"}
    monitor, reported = resolve_selection("val/f1", None, ("best_val_f1",), logged, ("wall_time_s",), "maximize")
    assert (monitor.mode, reported) == ("max", "val/f1")
    assert resolve_selection("val/f1", None, ("final_val_loss",), logged, (), "minimize")[1] == "val/loss"
    with pytest.raises(ConfigError, match="hydra.sweeper.direction=maximize"):
        resolve_selection("val/f1", None, ("best_val_f1",), logged, (), "minimize")


def test_function_metrics_are_exact_over_batches_of_any_size():
    """A batch mean weighted by its samples and a sum over a count give the split's value."""
    from harness.training.metrics.measure import FunctionMetric

    g = torch.Generator().manual_seed(0)
    out, y = torch.randn(101, 5, generator=g), (torch.rand(101, 5, generator=g) > 0.7).float()
    for fn, exact in ((label_agreement, ((out > 0) == (y > 0.5)).float().mean()),
                      (positives_found, ((out > 0) & (y > 0.5)).sum() / (y > 0.5).sum())):
        metric = FunctionMetric("m", fn, {}, "max", torch.device("cpu"), DistInfo(), "metrics.m._target_", "m")
        for i in range(0, 101, 16):
            metric.update(out[i:i + 16], (None, y[i:i + 16]), torch.tensor(float(len(y[i:i + 16]))))
        assert metric.compute() == pytest.approx(float(exact), abs=1e-6)


MASKED = ["data=custom", "data._target_=user_code.masked_sequences", "data.task=null",
          "model._target_=user_code.MaskedRegressor", "batch_size=64", "trainer.max_steps=4", "trainer.eval_every=4",
          "logger=none", "diagnose=false"]


def test_a_part_returned_as_a_mean_beside_count_is_refused_naming_it_and_a_summed_part_trains(tmp_path):
    """Beside `count` every part is a sum over the counted items: a mean there would be divided again."""
    with pytest.raises(ConfigError) as err:
        run(compose_cfg([*MASKED, "loss._target_=user_code.masked_mse_with_parts", "+loss.mean_part=true"]),
            run_dir=tmp_path / "mean")
    assert err.value.key == "loss._target_" and "close reads as a mean" in str(err.value)
    assert not (tmp_path / "mean").exists()
    _, summary = train([*MASKED, "loss._target_=user_code.masked_mse_with_parts"], tmp_path / "sum")
    row = _evals(tmp_path / "sum")[-1]
    assert 0 < row["val/loss/abs_error"] < row["val/loss"] ** 0.5 * 2  # a per-element mean, not a sum or a 1/n of one
