"""What is measured about the data when a run is built: val samples that are also training
samples, and training inputs far out of line with the rest."""
from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import TensorDataset

from harness.data.facts import split_facts
from harness.data.loader import BatchRecipe
from omegaconf import OmegaConf

RECIPE = BatchRecipe.from_config(OmegaConf.create({}))


def _splits():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(600, 8, generator=g), torch.randint(0, 3, (600,), generator=g)
    x[[5, 77, 301]] *= 1000.0  # a unit mix-up in three rows
    x[450, 2] = math.nan  # a corrupt record
    val_x = torch.randn(100, 8, generator=g)
    val_x[:10] = x[200:210]  # ten validation samples copied from training
    return TensorDataset(x, y), TensorDataset(val_x, torch.zeros(100, dtype=torch.long))


def test_overlap_and_outliers_are_found_in_one_read_of_the_training_split():
    train, val = _splits()
    facts = split_facts(train, val, RECIPE, "classification")
    assert facts["split_overlap"]["val_in_train"] == 10 and facts["split_overlap"]["share"] == 0.1
    outliers = facts["input_outliers"]
    assert outliers["count"] == 4 and outliers["checked"] == 600
    assert [s["index"] for s in outliers["samples"]][0] == 450  # not finite: listed first
    assert {s["index"] for s in outliers["samples"][1:]} == {5, 77, 301}
    assert 2.0 < outliers["median_norm"] < 4.0


def test_clean_data_has_no_outliers_and_token_streams_are_not_scanned():
    g = torch.Generator().manual_seed(1)
    train = TensorDataset(torch.randn(300, 8, generator=g), torch.zeros(300, dtype=torch.long))
    facts = split_facts(train, train, RECIPE, "classification")
    assert facts["input_outliers"]["count"] == 0 and facts["split_overlap"]["share"] == 1.0
    assert split_facts(train, train, RECIPE, "lm") == {"split_overlap": None, "input_outliers": None,
                                                       "target_outliers": None, "target_percentiles": None,
                                                       "target_rows_off_one": None, "split_contrast": None}
    assert facts["target_percentiles"] is None  # classification: no range to reach


def test_regression_targets_are_summed_up_by_their_percentiles():
    train = TensorDataset(torch.zeros(201, 2), torch.arange(201, dtype=torch.float32) - 100)
    percentiles = split_facts(train, train, RECIPE, "regression")["target_percentiles"]
    assert len(percentiles) == 101 and percentiles[0] == -100 and percentiles[50] == 0 and percentiles[100] == 100
    multi_label = TensorDataset(torch.zeros(4, 2), torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0],
                                                                [0.2, 0.3, 0.5], [0.0, 0.0, 0.0]]))
    assert split_facts(multi_label, multi_label, RECIPE, "regression")["target_rows_off_one"] == 0.5
    assert split_facts(train, train, RECIPE, "regression")["target_rows_off_one"] is None  # one value per sample


def test_regression_targets_far_from_the_rest_are_found():
    """Inputs look normal; a few targets were stored in the wrong unit (x1000)."""
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(500, 6, generator=g), torch.randn(500, 1, generator=g)
    y[[3, 40]] *= 1000.0
    y[7] = 5000.0
    facts = split_facts(TensorDataset(x, y), TensorDataset(x[:50], y[:50]), RECIPE, "regression")
    assert facts["input_outliers"]["count"] == 0
    found = facts["target_outliers"]
    assert found["count"] == 3 and [s["index"] for s in found["samples"]][0] == 7
    assert {s["index"] for s in found["samples"]} == {3, 7, 40} and found["samples"][0]["target"] == 5000.0
    assert split_facts(TensorDataset(x, y), TensorDataset(x, y), RECIPE, "classification")["target_outliers"] is None


def test_a_steep_but_clean_regression_target_has_no_outliers():
    """y = x^4: a long natural tail (some targets 15x the median deviation) within Tukey's fences."""
    x = torch.linspace(-1, 1, 400).unsqueeze(1)
    facts = split_facts(TensorDataset(x, x ** 4), TensorDataset(x, x ** 4), RECIPE, "regression")
    assert facts["target_outliers"]["count"] == 0


def test_the_splits_are_contrasted_where_one_split_only_preprocessing_shows():
    """so_59325381's bug, in small: training pixels and labels divided by 255 (every label cast to
    0), validation pixels left raw with labels 0-9."""
    g = torch.Generator().manual_seed(2)
    pixels, labels = torch.rand(400, 64, generator=g) * 255, torch.randint(0, 10, (400,), generator=g)
    train = TensorDataset(pixels / 255, (labels / 255).long())
    val = TensorDataset(torch.rand(200, 64, generator=g) * 255, torch.randint(0, 10, (200,), generator=g))
    contrast = split_facts(train, val, RECIPE, "classification")["split_contrast"]
    assert contrast["train_classes"] == 1 and contrast["train_class_values"] == [0] and contrast["val_classes"] == 10
    assert 0.85 < contrast["val_share_unseen"] < 0.95  # nine classes of ten never seen
    assert 200 < contrast["val_over_train_input_norm"] < 300
    same = split_facts(TensorDataset(pixels / 255, labels), TensorDataset(pixels[:200] / 255, labels[:200]), RECIPE,
                       "classification")["split_contrast"]
    assert same["train_classes"] == 10 and same["val_share_unseen"] == 0.0
    assert same["val_over_train_input_norm"] == pytest.approx(1.0, rel=0.05)
    constant = TensorDataset(torch.randn(50, 3, generator=g), torch.full((50,), 7.0))
    assert split_facts(constant, constant, RECIPE, "regression")["split_contrast"]["train_target_spread"] == 0.0
