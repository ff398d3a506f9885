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


class Labelled(torch.utils.data.Dataset):
    """A user's dataset that keeps its labels as an array attribute, torchvision style."""

    def __init__(self, targets) -> None:
        self.targets = targets

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int):
        return torch.zeros(3), self.targets[i]


class Opaque(Labelled):
    """... and one whose labels could only be had by reading every sample."""

    def __init__(self, targets) -> None:
        self._hidden = targets


def test_a_users_dataset_gets_a_prior_when_its_targets_are_at_hand():
    meta, labels = DataMeta("classification", out_features=2), torch.tensor([0, 1, 0, 1])
    assert prior_loss(TensorDataset(torch.zeros(4, 3), labels), meta) == pytest.approx(math.log(2))
    assert prior_loss(Labelled(np.array([0, 0, 0, 0])), meta) == 0.0
    assert prior_loss(Opaque(labels), meta) is None  # not read sample by sample: that could take long


def test_the_summary_holds_both_splits_priors(tmp_path):
    from conftest import train

    _, summary = train(["data=custom", "data._target_=user_code.pairs", "model=mlp", "model.width=16",
                        "trainer.max_steps=4", "trainer.eval_every=4", "trainer.log_every=2", "logger=none"],
                       tmp_path / "run")
    assert 0 < summary["prior_loss"] <= math.log(4) and 0 < summary["val_prior_loss"] <= math.log(4)
    assert summary["prior_loss"] != summary["val_prior_loss"]  # 256 and 64 samples: their own frequencies


def test_the_val_prior_is_the_prior_of_the_samples_the_evals_score():
    tokens = np.array([0, 1, 2, 3, 0, 0, 0, 0, 5, 5, 5, 5], dtype=np.uint16)
    windows, meta = TokenWindows(tokens, 2), DataMeta("lm", vocab_size=6, block_size=2)
    assert prior_loss(windows, meta, torch.tensor([4, 5])) == 0.0  # targets 0 0 and 0 0
    assert prior_loss(windows, meta, torch.tensor([0])) == pytest.approx(math.log(2))  # targets 1 2
    labels = TensorPairs(torch.zeros(4, 3), torch.tensor([0, 1, 1, 1]))
    assert prior_loss(labels, DataMeta("classification", out_features=2), torch.tensor([1, 3])) == 0.0
