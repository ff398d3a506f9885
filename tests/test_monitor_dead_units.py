"""monitor=basic counts dead units on any model from the gradients alone (`grad_dead/<layer>`)."""
from __future__ import annotations

import torch
from omegaconf import OmegaConf
from torch import nn

from harness.monitor import DEAD_COLLECTIONS, Monitor

BASIC = OmegaConf.create({"level": "basic", "every": 1})


def collect(monitor: Monitor, model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    model.zero_grad(set_to_none=True)
    model(x).square().mean().backward()
    monitor.after_backward()
    monitor.after_step()
    return {k: float(v) for k, v in monitor.pop()[0].items() if k.startswith("grad_dead/")}


def net_with_dead_units(dead: int) -> nn.Sequential:
    """A ReLU layer of 8 units whose first `dead` units have a bias so negative they are 0 for any input."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    with torch.no_grad():
        model[0].bias[:dead] = -100.0
    return model


def test_units_at_zero_for_every_sample_are_counted_and_live_ones_are_not():
    model = net_with_dead_units(dead=6)
    metrics = collect(Monitor(BASIC, model), model, torch.randn(32, 4))
    assert metrics == {"grad_dead/0": 6 / 8, "grad_dead/2": 0.0}


def test_an_input_zeroed_before_the_model_is_not_dead_units():
    """A zero input zeroes the first layer's weight gradient, but not its bias gradient."""
    model = net_with_dead_units(dead=0)
    with torch.no_grad():
        model[0].bias.fill_(0.1)  # every unit on for a zero input, so the output depends on each
    assert collect(Monitor(BASIC, model), model, torch.zeros(32, 4))["grad_dead/0"] == 0.0


def test_a_unit_is_dead_only_if_silent_on_each_of_the_last_collections():
    """Units silenced by one batch (homogeneous data read in order) but used by the next are alive."""
    model = net_with_dead_units(dead=0)
    monitor = Monitor(BASIC, model)
    torch.manual_seed(1)
    with torch.no_grad():
        model[0].weight.copy_(torch.eye(8, 4) * 5)  # units 0-3 follow the sign of inputs 0-3
        model[0].bias[:4] = 0.0
        model[0].bias[4:] = -1.0  # units 4-7 are always off
    positive, negative = torch.rand(16, 4) + 0.1, -torch.rand(16, 4)
    assert collect(monitor, model, negative)["grad_dead/0"] == 1.0  # one batch silences every unit
    assert collect(monitor, model, positive)["grad_dead/0"] == 0.5  # the next uses units 0-3 again
    for _ in range(DEAD_COLLECTIONS):
        last = collect(monitor, model, negative)
    assert last["grad_dead/0"] == 1.0  # silent on every one of the last collections
    assert collect(monitor, model, positive)["grad_dead/0"] == 0.5

    restored = Monitor(BASIC, model)
    restored.load_state_dict(monitor.state_dict())  # a resumed run remembers the recent batches
    assert collect(restored, model, negative)["grad_dead/0"] == 0.5  # the positive batch is still among the last 4
    assert collect(Monitor(BASIC, model), model, negative)["grad_dead/0"] == 1.0  # without the history
