"""data.standardize: inputs scaled by the training split's own statistics, in every split and
every read path; data.standardize_targets: regression targets too, with every loss still in the
targets' units; and the remedies that apply them to runs their raw inputs or targets broke."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import TensorDataset

from conftest import compose_cfg, one_line_error, run_cli, train
from harness.data import build_splits, validate_data_config
from harness.data.loader import BatchRecipe, Ticket, read_batch
from harness.data.standardize import TargetScale, standardised
from harness.core.errors import ConfigError
from harness.training.loss import compute_loss

pytestmark = pytest.mark.trajectory  # the remedy test follows a run its raw inputs broke

USER = ["model=mlp", "data=custom", "data._target_=tests.user_code.raw_columns", "~model.depth", "~model.activation",
        "~model.norm", "~model.residual", "~model.dropout", "~model.width", "trainer.max_steps=300"]


def raw(n: int, offset: float, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g) * torch.tensor([1000.0, 0.01, 0.0]) + torch.tensor([offset, 7.0, 42.0])
    return TensorDataset(x, torch.zeros(n, dtype=torch.long))


def test_every_split_is_scaled_by_the_training_splits_statistics():
    train_set, val_set = raw(512, 5000.0, 0), raw(256, 6000.0, 1)  # val sits one training std higher
    recipe, _ = standardised(BatchRecipe(), train_set, inputs=True)
    x, _ = read_batch(train_set, recipe, 0, Ticket(list(range(512)), 0))[1:]
    assert torch.allclose(x[:, :2].mean(0), torch.zeros(2), atol=1e-3)
    assert torch.allclose(x[:, :2].std(0), torch.ones(2), atol=1e-3)
    assert torch.equal(x[:, 2], torch.zeros(512))  # a column that never varies is only centred
    val_x, _ = read_batch(val_set, recipe, 0, Ticket(list(range(256)), -1))[1:]
    assert 0.8 < float(val_x[:, 0].mean()) < 1.2  # the training split's mean and std, not its own
    assert standardised(BatchRecipe(), train_set, inputs=False)[0].scale is None


def test_built_in_array_data_is_scaled_on_its_fast_path_too():
    cfg = compose_cfg(["model=mlp", "data=synthetic", "data.standardize=true"])
    splits = build_splits(validate_data_config(cfg.data))
    recipe, _ = standardised(BatchRecipe.from_config(cfg.data), splits.train, inputs=True)
    x, _ = read_batch(splits.train, recipe, 0, Ticket(list(range(len(splits.train))), 0))[1:]
    assert float(x.mean(0).abs().max()) < 1e-3 and float((x.std(0) - 1).abs().max()) < 1e-3


def test_integer_inputs_are_refused_in_one_line(tmp_path):
    ids = TensorDataset(torch.randint(0, 50, (64, 8)), torch.zeros(64, dtype=torch.long))
    with pytest.raises(ConfigError) as err:
        standardised(BatchRecipe(), ids, inputs=True)
    assert err.value.key == "data.standardize" and "token ids" in str(err.value)
    assert str(err.value).startswith("data.standardize=true is invalid")  # as typed, not Python's True
    result = run_cli(["debug=smoke", "data.standardize=yes", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert "true (each input feature" in one_line_error(result, "data.standardize")
    assert not (tmp_path / "run").exists()


def test_raw_columns_that_broke_a_user_model_are_standardised_by_the_remedy(tmp_path):
    """Columns in the tens of thousands: the first loss is thousands of times chance and the best
    val loss never gets below chance (on every CPU and seed tried, 6x or more above it), a critical
    cause; remedy=auto standardises the inputs first, from scratch."""
    _, summary = train([*USER, "diagnose.remedy=auto", "diagnose.report=false"], tmp_path / "run")
    first, second = summary["attempts"][:2]
    assert first["critical"][0] == "unnormalised_inputs" and first["best_val_loss"] > 0.7
    assert second["applied"]["overrides"] == ["data.standardize=true"] and second["applied"]["kind"] == "inputs"
    assert second["restart"] == "from scratch" and second["outcome"] == "kept"
    assert summary["remedy_verdict"] == "healed" and summary["best_val_accuracy"] > 0.95


PRICES = ["model=mlp", "data=custom", "data._target_=tests.user_code.prices", "data.task=regression", "~model.depth",
          "~model.activation", "~model.norm", "~model.residual", "~model.dropout", "~model.width",
          "model._target_=tests.user_code.Regressor", "trainer.max_steps=300", "trainer.eval_every=30"]


@pytest.mark.parametrize("function", ["mse", "l1", "huber"])
def test_the_loss_reads_in_the_targets_units_and_steps_as_on_standardised_targets(function):
    """The value is the loss of the output mapped back (x std + mean); the gradient is the one the
    same output gets against standardised targets, whatever the targets' scale."""
    scale = TargetScale(torch.tensor([1000.0, -3.0]), torch.tensor([50.0, 0.01]))
    g = torch.Generator().manual_seed(0)
    output = torch.randn(16, 2, generator=g, requires_grad=True)  # the model's, in standard units
    target = scale.prediction(torch.randn(16, 2, generator=g))
    loss = compute_loss(scale.prediction(output), target, "regression", function=function, target_scale=scale)
    by_hand = getattr(F, f"{function}_loss" if function != "mse" else "mse_loss")
    assert torch.allclose(loss, by_hand(scale.prediction(output.detach()), target), rtol=1e-5)
    loss.backward()
    reference = output.detach().clone().requires_grad_()
    by_hand(reference, scale(target)).backward()
    assert torch.allclose(output.grad, reference.grad, rtol=1e-4, atol=1e-7)


def test_targets_far_from_standard_units_are_standardised_by_the_remedy_on_a_user_regression(tmp_path):
    """Prices around 200,000: the output layer would need weights thousands of times its init, so the
    run never gets below the loss of predicting the mean (a critical); remedy=auto standardises the
    targets from scratch, and every loss it reports is still in the targets' units (dollars squared)."""
    _, summary = train([*PRICES, "diagnose.remedy=auto", "diagnose.report=false"], tmp_path / "run")  # a user's model
    first, second = summary["attempts"][:2]
    prior = summary["val_prior_loss"]
    assert first["critical"][0] == "unscaled_targets" and first["best_val_loss"] > prior
    assert second["applied"]["overrides"] == ["data.standardize_targets=true"] and second["applied"]["kind"] == "targets"
    assert second["restart"] == "from scratch" and second["outcome"] == "kept" and not second["applied"]["changes_model"]
    assert summary["remedy_verdict"] == "healed" and summary["best_attempt"] == 2
    assert 1e5 < summary["best_val_loss"] < 0.05 * prior  # fitted, and in dollars squared (standard units: ~1e-2)
    repaired = json.loads((tmp_path / "run" / "attempts" / "2" / "summary.json").read_text())
    assert repaired["target_scale"]["elements"] == 1 and 1.8e5 < repaired["target_scale"]["mean"][0] < 2.2e5
    assert max(abs(v) for v in (repaired["target_percentiles"][0], repaired["target_percentiles"][-1])) < 6


@pytest.mark.parametrize("overrides, what", [
    (["model=mlp", "data=custom", "data._target_=tests.user_code.multi_label", "data.task=regression",
      "loss.function=bce"], "loss.function=bce"),  # probabilities
    (["debug=smoke"], "data.task=lm")])  # token ids
def test_targets_that_are_not_real_values_are_refused_in_one_line(tmp_path, overrides, what):
    result = run_cli([*overrides, "data.standardize_targets=true", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert f"false for {what}" in one_line_error(result, "data.standardize_targets")
    assert not (tmp_path / "run").exists()
