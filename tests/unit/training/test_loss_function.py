"""`loss.function`: real-valued targets are scored by mse, l1, huber or bce (multi-label, soft or
per-pixel targets in [0, 1], read as logits), with the prior and the checks of that loss."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from conftest import one_line_error, run_cli, train
from harness.data.prior import constant_prediction_loss
from harness.training.loss import compute_loss, per_sample_loss

TORCH = {"mse": F.mse_loss, "l1": F.l1_loss, "huber": F.huber_loss, "bce": F.binary_cross_entropy_with_logits}
MULTI_LABEL = ["data=custom", "data._target_=tests.user_code.multi_label", "data.task=regression", "model=mlp",
               "trainer.max_steps=150", "trainer.eval_every=50", "diagnose.report=false"]


@pytest.mark.parametrize("function", list(TORCH))
def test_each_function_is_torchs_own_over_every_target_and_per_sample_means_agree(function):
    g = torch.Generator().manual_seed(0)
    output, target = torch.randn(6, 3, generator=g), torch.rand(6, 3, generator=g)
    loss = compute_loss(output, target, "regression", function=function)
    assert torch.equal(loss, TORCH[function](output, target))
    assert torch.allclose(per_sample_loss(output, target, "regression", function=function).mean(), loss)
    assert torch.equal(compute_loss(output[:, :1], target[:, 0], "regression", function=function),
                       TORCH[function](output[:, 0], target[:, 0]))  # [B, 1] against [B]: no broadcast


@pytest.mark.parametrize("function", list(TORCH))
def test_the_prior_is_the_loss_of_the_best_constant(function):
    g = torch.Generator().manual_seed(1)
    targets = (torch.rand(400, 2, generator=g) < torch.tensor([0.2, 0.7])).double() if function == "bce" else \
        torch.randn(400, 2, generator=g).double().exp()  # skewed: mean and median differ
    prior = constant_prediction_loss(targets, function)

    def loss_of(constant):
        guess = constant.expand_as(targets)
        if function == "bce":
            guess = torch.logit(constant.clamp(1e-7, 1 - 1e-7)).expand_as(targets)
        return float(TORCH[function](guess, targets))

    best = targets.mean(dim=0) if function in ("mse", "bce") else targets.median(dim=0).values
    if function != "huber":  # huber's best constant lies between the median and the mean
        assert prior == pytest.approx(loss_of(best), rel=1e-6)
    assert prior <= min(loss_of(targets.mean(dim=0)), loss_of(targets.median(dim=0).values)) + 1e-12
    for shift in (-0.05, -0.01, 0.01, 0.05):  # no constant near the best does better
        assert loss_of(best + shift) >= prior - 1e-9


@pytest.mark.trajectory
def test_a_multi_label_task_trains_under_bce_with_its_own_prior(tmp_path):
    _, summary = train([*MULTI_LABEL, "loss.function=bce"], tmp_path / "run")
    assert summary["loss_function"] == "bce" and summary["prior_loss"] == pytest.approx(0.69, abs=0.03)
    assert summary["best_val_loss"] < 0.6 * summary["prior_loss"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["train/loss"] >= 0 for r in rows if "train/loss" in r)


@pytest.mark.parametrize("extra, key, allowed", [
    (["loss.function=bce", "data=synthetic", "data.task=regression", "model=mlp"], "loss.function",
     "targets in [0, 1] (labels or probabilities); sampled train targets span"),
    (["loss.function=l1", "data=synthetic", "model=mlp"], "loss.function",
     "auto for classification and language modelling"),
])
def test_a_loss_the_targets_cannot_take_is_one_line(tmp_path, extra, key, allowed):
    result = run_cli([*extra, f"hydra.run.dir={tmp_path / 'bad'}"], cwd=tmp_path)
    assert allowed in one_line_error(result, key)
    assert not (tmp_path / "bad").exists()


def test_an_unknown_loss_function_is_refused_by_the_config_checks():
    from omegaconf import OmegaConf

    from harness.core.errors import ConfigError
    from harness.training.loss import loss_config

    with pytest.raises(ConfigError, match=r"loss.function='mae' is invalid.*auto \(cross-entropy for classes and "
                                          r"tokens, mse for real-valued targets\), mse, l1, huber, bce or model"):
        loss_config(OmegaConf.create({"function": "mae", "label_smoothing": 0.0, "z_loss": 0.0, "ignore_index": -100}))
