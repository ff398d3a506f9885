"""The prior loss: the loss of a model that learned the targets' statistics and nothing from its inputs."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from harness.data.base import DataMeta, TensorPairs, TokenWindows
from harness.data.prior import MAX_COUNTED, prior_loss

LM = DataMeta("lm", vocab_size=4, block_size=2)


def test_token_prior_is_the_entropy_of_the_targets():
    tokens = np.array([0, 0, 1, 0, 2, 0, 1, 3], dtype=np.uint16)  # targets: every token but the first
    p = np.array([3, 2, 1, 1]) / 7
    assert prior_loss(TokenWindows(tokens, 2), LM) == pytest.approx(float(-(p * np.log(p)).sum()))


def test_a_large_corpus_is_estimated_from_spaced_targets():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(300))
    tokens = rng.choice(300, size=4 * MAX_COUNTED, p=probs).astype(np.uint16)
    exact = float(-(probs * np.log(probs)).sum())
    assert prior_loss(TokenWindows(tokens, 2), DataMeta("lm", vocab_size=300, block_size=2)) == pytest.approx(exact, abs=5e-3)


def test_labels_and_regression_targets():
    labels = torch.tensor([0, 0, 0, 1])
    meta = DataMeta("classification", out_features=2)
    assert prior_loss(TensorPairs(torch.zeros(4, 3), labels), meta) == pytest.approx(
        -(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    y = torch.tensor([[1.0, 10.0], [3.0, 10.0]])  # variances 1 and 0: predicting the mean costs MSE 0.5
    assert prior_loss(TensorPairs(torch.zeros(2, 3), y), DataMeta("regression", out_features=2)) == pytest.approx(0.5)


def test_targets_held_by_a_users_dataset_are_not_read():
    assert prior_loss(TensorDataset(torch.zeros(4, 3), torch.tensor([0, 1, 0, 1])), DataMeta("classification",
                                                                                            out_features=2)) is None
