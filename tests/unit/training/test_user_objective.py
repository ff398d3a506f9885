"""Your own objective (`loss._target_`, `loss.function=model`) on batches of any structure: its parts
logged, accumulation, the guard, clipping, precision, resume, DDP, eval, doctor and LR finder on it,
and every bad objective refused in one line before a run dir exists."""
from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf

from conftest import (ROOT, compose_cfg, logged_train_losses, one_line_error, run_cli, run_dirs, torchrun, train,
                      wait_until)
from harness.assembly.assemble import assemble
from harness.config.run_config import validate_config
from harness.core.errors import ConfigError
from harness.models.calling import ModelCall
from harness.modes.run import run
from harness.logger.tracking import read_metrics
from harness.state.checkpoint import load_checkpoint, step_checkpoints

TESTS = ROOT / "tests"
VAE_MODEL = ["data=digits", "model._target_=user_code.TinyVAE", "loss._target_=user_code.vae_loss"]
VAE = [*VAE_MODEL, "+loss.beta=0.5", "trainer.max_steps=40", "trainer.log_every=10", "trainer.eval_every=20",
       "trainer.ckpt_every=20", "schedule.warmup=2", "logger=none"]
MASKED = ["data=custom", "data._target_=user_code.masked_sequences", "data.task=null",
          "model._target_=user_code.MaskedRegressor", "loss._target_=user_code.masked_mse_sum", "batch_size=64",
          "trainer.max_steps=20", "trainer.log_every=5", "trainer.eval_every=10", "trainer.ckpt_every=10",
          "schedule.warmup=2", "logger=none", "optim=adamw", "optim.lr=1e-2"]


def _assembled(overrides: list[str], run_dir):
    return assemble(validate_config(compose_cfg(overrides)), run_dir, torch.device("cpu"), resume_from=None)


@pytest.mark.trajectory
def test_a_vae_logs_its_parts_on_train_and_eval_rows_and_in_eval_json(tmp_path):
    _, summary = train(VAE, tmp_path / "run")
    rows = read_metrics(tmp_path / "run")
    train_rows = [r for r in rows if r["kind"] == "train"]
    evals = [r for r in rows if r["kind"] == "eval"]
    assert train_rows[-1]["train/loss"] < train_rows[0]["train/loss"]
    for row in train_rows:  # the loss is recon + 0.5 kl, window by window
        assert row["train/loss"] == pytest.approx(row["train/loss/recon"] + 0.5 * row["train/loss/kl"], rel=1e-4)
    assert evals[-1]["val/loss"] == pytest.approx(evals[-1]["val/loss/recon"] + 0.5 * evals[-1]["val/loss/kl"],
                                                  rel=1e-4)
    assert summary["status"] == "completed" and summary["prior_loss"] is None and summary["chance_loss"] is None
    assert summary["rank_rows_input_wide"]  # its reconstructions are as wide as its input images
    result = run(compose_cfg([*VAE, "mode=eval", "diagnose=false"]), run_dir=tmp_path / "run")
    scores = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert scores["val_loss"] == result and {"val_loss_recon", "val_loss_kl"} <= set(scores)
    assert "val_accuracy" not in scores  # the loss is not the classes' cross-entropy


@pytest.mark.trajectory
def test_eval_scores_every_part_on_val_and_test(tmp_path):
    train(MASKED, tmp_path / "run")
    run(compose_cfg([*MASKED, "mode=eval", "diagnose=false", "loss._target_=user_code.masked_mse_sum"]),
        run_dir=tmp_path / "run")
    scores = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert scores["test_samples"] == 60 and scores["val_samples"] == 100
    assert 0 < scores["test_loss"] < 10 and 0 < scores["val_loss"] < 10


def test_accumulation_with_a_counting_objective_equals_the_big_batch(tmp_path):
    """accum=4 x 16 == accum=1 x 64 when micro-batches count very different numbers of elements."""
    params = {}
    for accum in (1, 4):
        built = _assembled([*MASKED, f"accum={accum}"], tmp_path / str(accum))
        torch.set_num_threads(1)
        for _ in range(10):
            built.trainer.update()
        params[accum] = [p.detach().clone() for p in built.raw_model.parameters()]
        built.close()
    assert max((a - b).abs().max().item() for a, b in zip(params[1], params[4])) <= 1e-5


def test_without_a_count_an_update_is_the_mean_of_its_micro_batch_means(tmp_path):
    """The documented default: each micro-batch weighs the same; on uneven counts that is not the big batch."""
    params, losses = {}, {}
    for accum in (1, 4):
        built = _assembled([*MASKED, f"accum={accum}", "loss._target_=user_code.masked_mse_mean"],
                           tmp_path / str(accum))
        torch.set_num_threads(1)
        result = built.trainer.update()
        losses[accum] = result.loss.item()
        params[accum] = [p.detach().clone() for p in built.raw_model.parameters()]
        built.close()
    assert losses[4] != pytest.approx(losses[1], rel=1e-4)  # uneven masks: mean of means, as documented
    assert max((a - b).abs().max().item() for a, b in zip(params[1], params[4])) > 1e-6


@pytest.mark.trajectory
def test_the_guard_skips_a_non_finite_objective_and_every_clip_mode_runs(tmp_path):
    _, summary = train([*VAE, "fault=inf_loss", "fault.at=[7]", "trainer.max_steps=12"], tmp_path / "inf")
    assert summary["skipped_steps"] == 1 and summary["status"] == "completed"
    for mode in ("norm", "value", "layer", "adaptive"):
        built = _assembled([*VAE, f"clip_mode={mode}", "clip=0.05"], tmp_path / mode)
        before = [p.detach().clone() for p in built.raw_model.parameters()]
        result = built.trainer.update()
        moved = max((a - p.detach()).abs().max().item() for a, p in zip(before, built.raw_model.parameters()))
        assert torch.isfinite(result.loss) and moved > 0, mode
        built.close()


@pytest.mark.trajectory
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_reduced_precision_trains_a_user_objective(tmp_path, precision):
    _, summary = train([*VAE, f"precision={precision}", "trainer.max_steps=20"], tmp_path / precision)
    rows = [r for r in read_metrics(tmp_path / precision) if r["kind"] == "train"]
    assert summary["status"] == "completed" and rows[-1]["train/loss"] < rows[0]["train/loss"]
    assert ("train/loss_scale" in rows[-1]) == (precision == "fp16")
    assert all("train/loss/kl" in r for r in rows)


@pytest.mark.trajectory
def test_doctor_and_lr_finder_use_the_objective(tmp_path):
    failures = run(compose_cfg([*MASKED, "mode=doctor", "doctor.overfit_steps=100"]), run_dir=tmp_path / "doc")
    table = (tmp_path / "doc" / "doctor.json").read_text()
    assert failures == 0 and "masked_mse_sum" in table
    run(compose_cfg([*MASKED, "mode=lr_find", "lr_find.num_steps=40"]), run_dir=tmp_path / "lrf")
    found = json.loads((tmp_path / "lrf" / "lr_find.json").read_text())
    assert found["suggestion"] is not None and len(found["lrs"]) >= 20


def test_the_model_call_follows_the_batch_structure():
    from user_code import LossReturning, MaskedRegressor, PairEncoder

    batch = {"x": torch.zeros(2, 8), "y": torch.zeros(2, 6), "mask": torch.ones(2, 6)}
    assert ModelCall(MaskedRegressor()).arguments(batch) == ((), {"x": batch["x"]})
    assert ModelCall(MaskedRegressor()).unused(batch) == ["y", "mask"]
    assert list(ModelCall(LossReturning()).arguments(batch)[1]) == ["x", "y", "mask"]
    assert ModelCall(MaskedRegressor(), input_key="x").arguments(batch) == ((batch["x"],), {})
    a, b, y = torch.zeros(2, 8), torch.ones(2, 8), torch.zeros(2)
    assert ModelCall(PairEncoder()).arguments([a, b])[0] == (a, b)  # a two-view pair reaches forward(a, b)
    assert ModelCall(PairEncoder()).arguments([a, b, y])[0] == (a, b)
    assert ModelCall(MaskedRegressor()).arguments([a, y])[0] == (a,)  # (input, target): model(input), as always


@pytest.mark.trajectory
def test_a_model_that_computes_its_own_loss_trains_on_it_and_logs_its_aux_loss(tmp_path):
    overrides = [*MASKED, "model._target_=user_code.LossReturning", "loss._target_=null", "loss.function=model"]
    _, summary = train(overrides, tmp_path / "run")
    rows = [r for r in read_metrics(tmp_path / "run") if r["kind"] == "train"]
    assert rows[-1]["train/loss"] < rows[0]["train/loss"] and "train/loss/aux_loss" in rows[-1]


BAD = {
    "user_code.bad_vector": "vector returned a tensor of shape",
    "user_code.bad_number": "bad_number returned a float",
    "user_code.bad_no_loss": "a mapping without `loss`",
    "user_code.bad_detached": "a loss with a gradient path to the model's parameters",
    "user_code.bad_one_arg": "a function that takes (output, batch)",
    "user_code.no_such_objective": "a name defined in user_code",
    "no_such_module.objective": "no module 'no_such_module'",
}


@pytest.mark.parametrize("target", sorted(BAD))
def test_a_bad_objective_is_refused_before_a_run_dir_exists(tmp_path, target):
    with pytest.raises(ConfigError) as refused:
        train([*VAE_MODEL, f"loss._target_={target}"], tmp_path / "run")
    assert str(refused.value).startswith("loss._target_=") and BAD[target] in str(refused.value)
    assert not (tmp_path / "run").exists()


def test_model_loss_on_a_model_without_one_is_one_line_with_exit_2_and_no_run_dir(tmp_path):
    result = run_cli(["data=digits", "model=mlp", "loss.function=model", f"hydra.run.dir={tmp_path / 'run'}"],
                     cwd=tmp_path)
    assert "holds a `loss`" in one_line_error(result, "loss.function")
    assert not (tmp_path / "run").exists()


def test_a_killed_run_resumes_bitwise_on_a_user_objective(tmp_path):
    """kill -9 mid-run, resume=auto: the same weights and logged losses as a run never killed."""
    whole = [*VAE, "trainer.max_steps=60", "trainer.ckpt_every=20", "diagnose=false"]
    slow = [*whole, "+loss.delay=0.02"]
    run_dir = tmp_path / "killed"
    shutil.copy(TESTS / "user_code.py", tmp_path)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *slow, f"hydra.run.dir={run_dir}"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: any(r["step"] > 25 for r in read_metrics(run_dir)), "the run to pass step 25")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    assert not (run_dir / "summary.json").exists()
    result = run_cli([*slow, "resume=auto", f"hydra.run.dir={run_dir}"], cwd=tmp_path, env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    train(whole, tmp_path / "whole")
    a, b = (load_checkpoint(step_checkpoints(d)[0])["model"] for d in (run_dir, tmp_path / "whole"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = [{r["step"]: r["train/loss/kl"] for r in read_metrics(d) if r["kind"] == "train"}
              for d in (run_dir, tmp_path / "whole")]
    assert losses[0] == losses[1]


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_two_ranks_equal_one_process_on_a_counting_objective(tmp_path, parallel):
    ddp = [*MASKED, "diagnose=false", "accum=2", f"parallel={parallel}"]
    shutil.copy(TESTS / "user_code.py", tmp_path)  # modules are found in the directory train.py starts from
    torchrun(ddp, cwd=tmp_path)
    (ddp_dir,) = run_dirs(tmp_path)
    train([*ddp[:-1], "parallel=ddp"], tmp_path / "single")
    summaries = [json.loads((d / "summary.json").read_text()) for d in (ddp_dir, tmp_path / "single")]
    assert summaries[0]["best_val_loss"] == pytest.approx(summaries[1]["best_val_loss"], rel=1e-6)
    # the logged train loss is the mean over every rank's counted items, as one process logs it
    ddp_rows, single_rows = (logged_train_losses(d) for d in (ddp_dir, tmp_path / "single"))
    assert len(ddp_rows) == len(single_rows) == 5 and ddp_rows == pytest.approx(single_rows, rel=1e-5)
    if parallel == "ddp":  # a sharded checkpoint is a directory of shards: the val loss above compares it
        a, b = (load_checkpoint(step_checkpoints(d)[0])["model"] for d in (ddp_dir, tmp_path / "single"))
        assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6


def _findings(run_dir) -> dict[str, str]:
    from harness.diagnosis import diagnose, load_run

    return {f.name: f.severity.value for f in diagnose(load_run(run_dir))}


LONG = ["trainer.max_steps=300", "trainer.eval_every=50", "trainer.log_every=25", "clip=null"]


@pytest.mark.trajectory
def test_posterior_collapse_is_named_and_its_healthy_twin_stays_clean(tmp_path):
    vae = [*VAE_MODEL, *LONG, "logger=none"]
    train([*vae, "+loss.beta=50"], tmp_path / "collapsed")
    train([*vae, "+loss.beta=0.5"], tmp_path / "healthy")
    assert "posterior_collapse" in _findings(tmp_path / "collapsed")
    assert all(severity == "info" for severity in _findings(tmp_path / "healthy").values())


@pytest.mark.trajectory
def test_representation_collapse_is_named_and_a_contrastive_twin_stays_clean(tmp_path):
    views = ["data=custom", "data._target_=user_code.view_pairs", "data.task=null", *LONG, "logger=none",
             "model._target_=user_code.PairProjector"]
    _, summary = train([*views, "loss._target_=user_code.views_agree"], tmp_path / "collapsed")
    train([*views, "loss._target_=user_code.views_contrast"], tmp_path / "healthy")
    assert summary["initial_effective_rank"] > 2.5  # the untrained projector spreads its embeddings
    assert summary["rank_rows_input_wide"]  # a projector as wide as its input: its objective has no recon part
    assert "representation_collapse" in _findings(tmp_path / "collapsed")
    assert all(severity == "info" for severity in _findings(tmp_path / "healthy").values())
    rank = [r["val/effective_rank"] for r in read_metrics(tmp_path / "healthy") if r["kind"] == "eval"]
    assert min(rank) > 2.5


@pytest.mark.trajectory
def test_an_objective_below_zero_is_not_judged_by_loss_ratios(tmp_path):
    import harness.diagnosis.rules as rules
    from harness.diagnosis import load_run
    from harness.diagnosis.report import write_report

    views = ["data=custom", "data._target_=user_code.view_pairs", "data.task=null", *LONG, "logger=none",
             "model._target_=user_code.PairProjector", "loss._target_=user_code.negative_agreement"]
    train(views, tmp_path / "run")
    names = {f.name for f in write_report(tmp_path / "run", plots=False)}
    assert not names & {"diverging", "oscillating", "underfitting", "slow_progress"}
    assert "loss reaches 0 or below" in (tmp_path / "run" / "report.md").read_text()
    assert rules.signed_loss(load_run(tmp_path / "run"))  # the ratio rules were not run on it


@pytest.mark.trajectory
def test_a_drowned_part_is_named_and_a_balanced_twin_stays_clean(tmp_path):
    tasks = ["data=digits", "model._target_=user_code.TwoHeads", "loss._target_=user_code.digit_and_ink", *LONG,
             "logger=none", "optim=sgd", "optim.lr=0.05", "trainer.max_steps=400"]
    train([*tasks, "+loss.ink_weight=1e-4"], tmp_path / "drowned")
    train([*tasks, "+loss.ink_weight=1"], tmp_path / "balanced")
    shares = [r["grad_share/digit"] for r in read_metrics(tmp_path / "drowned") if "grad_share/digit" in r]
    assert len(shares) >= 10 and min(shares) > 0.95
    assert "drowned_part" in _findings(tmp_path / "drowned")
    assert all(severity == "info" for severity in _findings(tmp_path / "balanced").values())


def test_what_the_loss_does_not_read_is_said_once_and_a_nested_target_is_built(tmp_path, caplog):
    """Nothing is dropped in silence: a dict output's other fields and a dict sample's unread
    fields each get an INFO line naming them; a model key with its own _target_ arrives built."""
    caplog.set_level("INFO", logger="harness")
    short = ["trainer.max_steps=4", "trainer.eval_every=4", "logger=none"]
    train(["data=custom", "data._target_=user_code.masked_sequences", "data.task=regression",
           "data.input_key=x", "data.target_key=y", "model=mlp", *short], tmp_path / "dict_samples")
    train(["data=digits", "model._target_=user_code.Classifier", "+model.returns=dict", *short],
          tmp_path / "dict_output")
    said = caplog.text
    assert "the samples' mask is not read" in said and "loss._target_" in said
    assert "Classifier's output also holds hidden" in said
    _, summary = train(["data=digits", "model._target_=user_code.ConfiguredNet",
                        "+model.config._target_=types.SimpleNamespace", "+model.config.width=16", *short],
                       tmp_path / "configured")
    assert summary["status"] == "completed"


def test_a_model_whose_output_follows_the_batch_size_is_refused_before_training(tmp_path):
    """A last partial batch (of an epoch, or of the eval) must not crash mid-run: the model is probed
    on a smaller batch too, and an output that does not fit it is one line."""
    with pytest.raises(ConfigError, match=r"BatchScores returned \[3, 3\].*expected float logits \[3, 4\]"):
        train(["data=custom", "data._target_=user_code.pairs", "model._target_=user_code.BatchScores",
               "batch_size=4", "trainer.max_steps=4", "logger=none"], tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_task_less_data_takes_any_model_option_under_an_objective():
    """data.task=null is no language-modelling data: a vector model is not refused for it."""
    config = validate_config(compose_cfg([*(o for o in MASKED if not o.startswith("model.")), "model=mlp"]))
    assert config.user_loss is not None and config.model.path.endswith("MLP")


@pytest.mark.parametrize("samples, model", [
    ("dicts", ["data._target_=user_code.masked_sequences", "model._target_=user_code.MaskedRegressor",
               "loss._target_=user_code.masked_mse_sum"]),
    ("two views", ["data._target_=user_code.view_pairs", "model._target_=user_code.PairEncoder",
                   "loss._target_=user_code.views_contrast"]),
    ("(input, label) pairs and a built-in model", ["data._target_=user_code.pairs", "model=mlp",
                                                   "loss._target_=user_code.focal_loss"]),
])
def test_your_own_objective_takes_any_custom_samples_without_a_task_switch(tmp_path, samples, model):
    """data=custom's task is `auto`: beside your own objective the batches go whole to it, with no
    data.task=null to know about; pairs still tell a built-in model its sizes; the record says null."""
    _, summary = train(["data=custom", *model, "trainer.max_steps=6", "trainer.eval_every=3", "logger=none",
                        "diagnose=false"], tmp_path / "run")
    assert summary["status"] == "completed" and math.isfinite(summary["best_val_loss"])
    assert OmegaConf.load(tmp_path / "run" / "config.yaml").data.task is None


def test_without_an_objective_auto_is_classification_and_dict_samples_name_both_ways_out(tmp_path):
    config = validate_config(compose_cfg(["data=custom", "data._target_=user_code.pairs", "model=mlp"]))
    assert config.record.data.task == "classification" and config.user_loss is None
    with pytest.raises(ConfigError, match=r"data.input_key=None.*one of \['mask', 'x', 'y'\].*loss._target_="):
        train(["data=custom", "data._target_=user_code.masked_sequences", "model=mlp", "logger=none"], tmp_path / "r")
