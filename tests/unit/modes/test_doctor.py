"""The doctor: each check passes on a healthy setup and fails, naming the culprit, on a planted defect."""
from __future__ import annotations

import json

import pytest
import torch
from torch.optim.lr_scheduler import LambdaLR

from conftest import TINY_GPT, compose_cfg, run_cli
from harness.modes.doctor import DoctorConfig, Status, _run_check, diagnose
from harness.modes.doctor.data_checks import check_inputs, judge_inputs, judge_labels
from harness.modes.doctor.gradcheck import check_gradients
from harness.modes.doctor.model_checks import check_gradient_flow, check_initial_loss, check_overfit
from harness.modes.doctor.schedule_check import check_schedule, judge_schedule
from harness.assembly.assemble import assemble
from harness.config.run_config import validate_config

# one thread per subprocess: spin-waiting OpenMP threads crawl on a busy shared machine
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
VECTOR = ["model=mlp", "data=synthetic", "model.width=32", "logger=none"]
# our MLP's keys are not the user model's: drop them, keep `width`
USER_MODEL = ["model=mlp", "data=synthetic", "~model.depth", "~model.activation", "~model.norm",
              "~model.residual", "~model.dropout", "model.width=32"]
FAST = ["++doctor.overfit_steps=150"]


@pytest.fixture
def make_run(tmp_path):
    made = []

    def make(overrides: list[str]):
        torch.set_num_threads(1)
        built = assemble(validate_config(compose_cfg(overrides)), tmp_path / f"run{len(made)}", torch.device("cpu"), None)
        made.append(built)
        return built

    yield make
    for built in made:
        built.close()


def statuses(results) -> dict[str, str]:
    return {r.name: r.outcome.status.value for r in results}


# ------------------------------------------------------------------ the command line
@pytest.mark.trajectory
@pytest.mark.parametrize("overrides", [[], VECTOR], ids=["defaults", "mlp-synthetic"])
def test_doctor_passes_on_defaults(overrides, tmp_path):
    result = run_cli(["mode=doctor", f"hydra.run.dir={tmp_path}", *overrides], env=ONE_THREAD)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / "doctor.json").read_text())
    assert report["counts"]["fail"] == report["counts"]["warn"] == 0 and report["counts"]["pass"] >= 6, report
    assert "doctor passed" in result.stderr + result.stdout
    assert f"[INFO] run dir: {tmp_path}" in result.stdout  # the first line, as every run
    assert (tmp_path / "doctor.md").read_text().count("| PASS |") == report["counts"]["pass"]


def test_doctor_fails_and_names_a_parameter_without_gradient(tmp_path):
    result = run_cli(["mode=doctor", f"hydra.run.dir={tmp_path}", *USER_MODEL, *FAST,
                      "model._target_=tests.doctor_models.UnusedParamNet"], env=ONE_THREAD)
    assert result.returncode == 1, result.stdout + result.stderr
    row = next(r for r in json.loads((tmp_path / "doctor.json").read_text())["checks"]
               if r["name"] == "every parameter gets a gradient")
    assert row["status"] == "FAIL" and "no gradient: unused" in row["measured"] and row["fix"]
    assert "FAIL" in result.stdout and "unused" in result.stdout  # the plain-text table, not only the files


# ------------------------------------------------------------------ the checks, one by one
def test_gradient_flow_names_only_the_unused_parameter(make_run):
    result = check_gradient_flow(make_run([*USER_MODEL, "model._target_=tests.doctor_models.UnusedParamNet"]))
    assert result.status is Status.FAIL
    assert "1 of 5 tensors" in result.measured and "unused" in result.measured and "body" not in result.measured


def test_gradient_check_catches_a_wrong_backward(make_run):
    result = check_gradients(make_run([*USER_MODEL, "model._target_=tests.doctor_models.WrongBackwardNet"]))
    assert result.status is Status.FAIL
    assert "first.weight" in result.measured and "second" not in result.measured  # only what is upstream of the bug


@pytest.mark.parametrize("overrides", [[*TINY_GPT, "model.dropout=0.1"], [*VECTOR, "model.norm=batch"]],
                         ids=["gpt-dropout", "mlp-batchnorm"])
def test_gradient_check_passes_on_our_models(overrides, make_run):
    result = check_gradients(make_run(overrides))
    assert result.status is Status.PASS, result.measured


def test_initial_loss_near_chance_passes_and_a_hot_head_fails(make_run):
    built = make_run(VECTOR)
    assert check_initial_loss(built).status is Status.PASS
    with torch.no_grad():
        built.raw_model.head.weight.mul_(100.0)  # logits in the tens: confidently wrong before training
    result = check_initial_loss(built)
    assert result.status is Status.FAIL and "ln(10)" in result.measured


def test_initial_loss_is_skipped_for_regression(make_run):
    result = check_initial_loss(make_run([*VECTOR, "data.task=regression"]))
    assert result.status is Status.SKIP and "MSE" in result.measured


@pytest.mark.trajectory
def test_overfit_passes_at_the_configured_lr_and_fails_when_nothing_can_move(make_run):
    settings = DoctorConfig(overfit_steps=150)
    assert check_overfit(make_run(VECTOR), settings).status is Status.PASS
    result = check_overfit(make_run([*VECTOR, "optim.lr=1e-9"]), settings)
    assert result.status is Status.FAIL and "in 150 updates" in result.measured


def _both_splits(x: torch.Tensor, y: torch.Tensor) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    return {"train": (x, y), "val": (x, y)}


def test_labels_must_vary_and_fit_the_outputs(make_run):
    x, meta = torch.randn(64, 32), make_run(VECTOR).meta
    assert judge_labels(_both_splits(x, torch.arange(64) % 10), meta).status is Status.PASS
    constant = judge_labels(_both_splits(x, torch.full((64,), 3)), meta)
    assert constant.status is Status.FAIL and "every sampled train label is 3" in constant.measured
    out_of_range = judge_labels(_both_splits(x, torch.arange(64) % 12), meta)
    assert out_of_range.status is Status.FAIL and "[0, 11], outside [0, 10)" in out_of_range.measured


def test_regression_targets_must_vary(make_run):
    meta = make_run([*VECTOR, "data.task=regression"]).meta
    assert judge_labels(_both_splits(torch.randn(64, 32), torch.ones(64, 1)), meta).status is Status.FAIL


def test_inputs_must_be_finite_and_token_ids_in_vocab(make_run):
    x = torch.randn(64, 32)
    x[5, 7] = float("nan")
    result = judge_inputs(_both_splits(x, torch.arange(64) % 10), None)
    assert result.status is Status.FAIL and "1 NaN/Inf" in result.measured
    gpt = make_run([*TINY_GPT, "logger=none"])
    assert check_inputs(gpt).status is Status.PASS
    ids = torch.randint(0, gpt.meta.vocab_size, (16, 33))
    ids[3, 4] = gpt.meta.vocab_size + 5
    result = judge_inputs(_both_splits(ids[:, :-1], ids[:, 1:]), gpt.meta.vocab_size)
    assert result.status is Status.FAIL and f"outside [0, {gpt.meta.vocab_size})" in result.measured


def test_schedule_passes_as_built_and_catches_a_mismatched_length(make_run):
    built = make_run([*VECTOR, "trainer.max_steps=1000", "schedule=cosine", "schedule.warmup=50"])
    assert check_schedule(built).status is Status.PASS
    # a hand-written cosine over 500 steps in a 1000-step run: the last half runs at the floor
    short = LambdaLR(built.optimizer, lambda s: max(0.1, 1 - s / 500))
    result = judge_schedule(short, built.config.schedule, 1000)
    assert result.status is Status.FAIL and "floor before the last step" in result.fix
    from_zero = LambdaLR(built.optimizer, lambda s: min(1.0, s / 50))  # the first update gets LR 0
    assert "LR 0" in judge_schedule(from_zero, built.config.schedule, 1000).fix


def test_schedule_warns_about_a_long_warmup(make_run):
    result = check_schedule(make_run([*VECTOR, "trainer.max_steps=100", "schedule.warmup=40"]))
    assert result.status is Status.WARN and "40/100" in result.measured


@pytest.mark.trajectory
def test_the_doctor_leaves_the_trainer_as_built(make_run):
    built = make_run([*VECTOR, "accum=2"])
    before = {k: v.clone() for k, v in built.raw_model.state_dict().items()}
    results = diagnose(built, DoctorConfig(overfit_steps=150))
    assert set(statuses(results).values()) == {"PASS"}, results
    assert all(torch.equal(before[k], v) for k, v in built.raw_model.state_dict().items())
    assert built.trainer.state.step == 0 and not built.optimizer.state and built.trainer.batches.stream.offset == 0


def test_a_check_that_crashes_is_a_failure_row(make_run):
    built = make_run(VECTOR)

    def wrong_width(t):  # a batch the model cannot take
        return t.raw_model(torch.randn(4, 7))

    row = _run_check("initial loss vs ln(K)", wrong_width, built)
    assert row.outcome.status is Status.FAIL and "raised RuntimeError" in row.outcome.measured
