"""A multi-part objective's gradient shares: the weights the parts are summed with are recovered
from the gradients alone."""
from __future__ import annotations

import pytest
import torch

from harness.training.part_shares import gradient_shares


def test_shares_follow_the_weighted_gradients_of_the_parts():
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(5))
    x, y = torch.randn(5), torch.randn(5)
    a, b = (w * x).sum().pow(2), (w - y).pow(2).sum()
    shares = gradient_shares({"a": a, "b": b, "accuracy": torch.tensor(0.5)}, 3.0 * a + 0.01 * b, [w])
    ga, gb = torch.autograd.grad(a, w, retain_graph=True)[0], torch.autograd.grad(b, w, retain_graph=True)[0]
    expected = 3.0 * ga.norm() / (3.0 * ga.norm() + 0.01 * gb.norm())
    assert set(shares) == {"a", "b"}  # a part without a gradient (a metric) has no share
    assert shares["a"].item() == pytest.approx(expected.item(), rel=1e-4)
    assert (shares["a"] + shares["b"]).item() == pytest.approx(1.0, rel=1e-6)


def test_one_differentiable_part_has_no_shares():
    w = torch.nn.Parameter(torch.ones(3))
    assert gradient_shares({"only": w.sum()}, 2 * w.sum(), [w]) == {}
