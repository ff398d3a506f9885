"""monitor=basic counts dead units on any model from the gradients alone (`grad_dead/<layer>`)."""
from __future__ import annotations

import torch
from torch import nn

from harness.training.monitor import DEAD_COLLECTIONS, Monitor, MonitorConfig

BASIC = MonitorConfig(level="basic", every=1)


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


FULL = MonitorConfig(level="full", every=1)


def act_dead(monitor: Monitor, model: nn.Module, x: torch.Tensor) -> dict[str, float]:
    with monitor.capture_forward(True):
        model(x)
    return {k: float(v) for k, v in monitor.pop()[0].items() if k.startswith("act_dead/")}


def test_forward_hooks_count_a_unit_dead_only_if_zero_on_each_of_the_last_collections():
    """At batch 1 about half of a healthy ReLU layer is 0 for the one sample: one batch cannot
    call a unit dead; the last collections' samples together can."""
    model = net_with_dead_units(dead=2)
    monitor = Monitor(FULL, model)
    torch.manual_seed(3)
    first = act_dead(monitor, model, torch.randn(1, 4))["act_dead/1"]
    for _ in range(12):
        last = act_dead(monitor, model, torch.randn(1, 4))["act_dead/1"]
    assert first > 2 / 8  # one sample: live units look dead too
    assert last == 2 / 8  # only the units no sample of the last collections reached


def test_forward_hooks_count_channels_of_a_feature_map_and_each_place_of_a_shared_relu():
    """A conv's units are its channels (dim 1), not the last spatial dim; a ReLU module applied at
    two places reports each place."""
    class Shared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.act, self.head = nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Linear(4, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.head(self.act(self.conv(x)).mean((2, 3))))

    model = Shared()
    with torch.no_grad():
        model.conv.bias[:3] = -100.0  # three of four channels off everywhere
        model.head.bias.fill_(100.0)  # every head unit on
    metrics = act_dead(Monitor(FULL, model), model, torch.randn(8, 1, 6, 6))
    assert metrics == {"act_dead/act": 3 / 4, "act_dead/act#1": 0.0}
