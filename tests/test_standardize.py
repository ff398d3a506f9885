"""data.standardize: inputs scaled by the training split's own statistics, in every split and
every read path; and the remedy that applies it to a run its raw inputs broke."""
from __future__ import annotations

import pytest
import torch
from torch.utils.data import TensorDataset

from conftest import compose_cfg, one_line_error, run_cli, train
from harness.data import build_splits
from harness.data.loader import BatchRecipe, Ticket, read_batch
from harness.data.standardize import with_input_scale
from harness.core.errors import ConfigError

pytestmark = pytest.mark.trajectory  # the remedy test follows a run its raw inputs broke

USER = ["model=mlp", "data=custom", "data._target_=tests.user_code.raw_columns", "~model.depth", "~model.activation",
        "~model.norm", "~model.residual", "~model.dropout", "~model.width", "trainer.max_steps=300"]


def raw(n: int, offset: float, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, generator=g) * torch.tensor([1000.0, 0.01, 0.0]) + torch.tensor([offset, 7.0, 42.0])
    return TensorDataset(x, torch.zeros(n, dtype=torch.long))


def test_every_split_is_scaled_by_the_training_splits_statistics():
    train_set, val_set = raw(512, 5000.0, 0), raw(256, 6000.0, 1)  # val sits one training std higher
    recipe = with_input_scale(BatchRecipe(), train_set, standardize=True)
    x, _ = read_batch(train_set, recipe, 0, Ticket(list(range(512)), 0))[1:]
    assert torch.allclose(x[:, :2].mean(0), torch.zeros(2), atol=1e-3)
    assert torch.allclose(x[:, :2].std(0), torch.ones(2), atol=1e-3)
    assert torch.equal(x[:, 2], torch.zeros(512))  # a column that never varies is only centred
    val_x, _ = read_batch(val_set, recipe, 0, Ticket(list(range(256)), -1))[1:]
    assert 0.8 < float(val_x[:, 0].mean()) < 1.2  # the training split's mean and std, not its own
    assert with_input_scale(BatchRecipe(), train_set, standardize=False).scale is None


def test_built_in_array_data_is_scaled_on_its_fast_path_too():
    cfg = compose_cfg(["model=mlp", "data=synthetic", "data.standardize=true"])
    splits = build_splits(cfg.data)
    recipe = with_input_scale(BatchRecipe.from_config(cfg.data), splits.train, standardize=True)
    x, _ = read_batch(splits.train, recipe, 0, Ticket(list(range(len(splits.train))), 0))[1:]
    assert float(x.mean(0).abs().max()) < 1e-3 and float((x.std(0) - 1).abs().max()) < 1e-3


def test_integer_inputs_are_refused_in_one_line(tmp_path):
    ids = TensorDataset(torch.randint(0, 50, (64, 8)), torch.zeros(64, dtype=torch.long))
    with pytest.raises(ConfigError) as err:
        with_input_scale(BatchRecipe(), ids, standardize=True)
    assert err.value.key == "data.standardize" and "token ids" in str(err.value)
    assert str(err.value).startswith("data.standardize=true is invalid")  # as typed, not Python's True
    result = run_cli(["debug=smoke", "data.standardize=yes", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert "true (each input feature" in one_line_error(result, "data.standardize")
    assert not (tmp_path / "run").exists()


def test_raw_columns_that_broke_a_user_model_are_standardised_by_the_remedy(tmp_path):
    """Columns in the thousands: the first loss is ~500x chance and the best val loss never gets
    below chance, a critical cause; remedy=auto standardises the inputs first, from scratch."""
    _, summary = train([*USER, "diagnose.remedy=auto", "diagnose.report=false"], tmp_path / "run")
    first, second = summary["attempts"][:2]
    assert first["critical"][0] == "unnormalised_inputs" and first["best_val_loss"] > 0.7
    assert second["applied"]["overrides"] == ["data.standardize=true"] and second["applied"]["kind"] == "inputs"
    assert second["restart"] == "from scratch" and second["outcome"] == "kept"
    assert summary["remedy_verdict"] == "healed" and summary["best_val_accuracy"] > 0.95
