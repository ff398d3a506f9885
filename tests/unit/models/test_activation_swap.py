"""activation_swap: the hidden activation modules of any built model are replaced; the output's own
activation, functional calls and modules never called stay; bad values are one line."""
from __future__ import annotations

import torch
from torch import nn

from conftest import one_line_error, run_cli, train
from harness.models.activation_swap import swap_activations


class UserNet(nn.Module):
    """Hidden ReLUs, a functional relu, a shared Tanh used twice, and a sigmoid output (a probability)."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.out = nn.Linear(4, 8), nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 1)
        self.relu, self.tanh, self.prob, self.spare = nn.ReLU(), nn.Tanh(), nn.Sigmoid(), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.tanh(self.b(self.relu(self.a(x))))
        h = self.tanh(torch.relu(self.c(h)))
        return self.prob(self.out(h))


def test_hidden_modules_are_swapped_and_the_output_activation_stays():
    model = UserNet()
    before = model(torch.ones(2, 4))
    replaced = swap_activations(model, "gelu", torch.randn(3, 4))
    assert replaced == ["relu: ReLU -> GELU", "tanh: Tanh -> GELU"]
    assert isinstance(model.prob, nn.Sigmoid) and isinstance(model.spare, nn.ReLU)  # the output; never called
    assert model.training and not torch.equal(before, model(torch.ones(2, 4)))
    assert swap_activations(model, "gelu", torch.randn(3, 4)) == []  # already GELU
    assert swap_activations(model, None, torch.randn(3, 4)) == []


def test_a_run_records_what_it_swapped_and_a_bad_value_is_one_line(tmp_path):
    _, summary = train(["model=mlp", "data=synthetic", "activation_swap=leaky_relu", "trainer.max_steps=5",
                        "trainer.eval_every=5"], tmp_path / "run")
    assert summary["activation_swap"] == ["stem.1: ReLU -> LeakyReLU", "hidden.0.act: ReLU -> LeakyReLU",
                                          "hidden.1.act: ReLU -> LeakyReLU"]
    result = run_cli(["activation_swap=relu", f"hydra.run.dir={tmp_path / 'bad'}"], cwd=tmp_path)
    assert "null or one of ['gelu', 'silu', 'leaky_relu']" in one_line_error(result, "activation_swap")
    assert not (tmp_path / "bad").exists()
