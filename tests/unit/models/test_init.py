"""The init group on any model: kaiming's ReLU gain goes to the layers a ReLU reads, not the head."""
from __future__ import annotations

import math

import torch
from torch import nn

from harness.models.init import InitConfig, apply_init


def test_kaiming_leaves_the_head_at_a_gain_of_one_so_the_first_logits_stay_near_chance():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 256))
    apply_init(model, InitConfig(name="kaiming", std=0.02))
    hidden_std, head_std = float(model[2].weight.std()), float(model[4].weight.std())
    assert abs(hidden_std - math.sqrt(2 / 512)) < 0.05 * math.sqrt(2 / 512)  # He: sqrt(2 / fan_in)
    assert abs(head_std - math.sqrt(2 / (512 + 256))) < 0.05 * math.sqrt(2 / 768)  # Glorot
    assert all(float(m.bias.abs().max()) == 0 for m in model if isinstance(m, nn.Linear))
