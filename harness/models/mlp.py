"""MLP for vector data, with the switches (activation, norm, residual) that make or break depth."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from harness.models.checks import Problem, size_and_dropout_problems

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
NORMS = {"none": lambda width: nn.Identity(), "layer": nn.LayerNorm, "batch": nn.BatchNorm1d}


@dataclass
class MLPConfig:
    in_features: int = 0
    """Filled in from the data."""
    out_features: int = 0
    """Filled in from the data (classes, or regression outputs)."""
    depth: int = 3
    """Hidden layers."""
    width: int = 128
    activation: str = "relu"
    norm: str = "none"
    """none | layer | batch, applied before each hidden layer's activation."""
    residual: bool = False
    """Hidden layers become x + f(x): gradients reach early layers even in deep stacks."""
    dropout: float = 0.0

    def problems(self) -> list[Problem]:
        problems = size_and_dropout_problems(self, ("depth", "width"))
        if self.activation not in ACTIVATIONS:
            problems.append(("activation", self.activation, f"one of {sorted(ACTIVATIONS)}"))
        if self.norm not in NORMS:
            problems.append(("norm", self.norm, f"one of {sorted(NORMS)}"))
        return problems


class HiddenLayer(nn.Module):
    def __init__(self, cfg: MLPConfig) -> None:
        super().__init__()
        self.residual = cfg.residual
        self.linear = nn.Linear(cfg.width, cfg.width)
        self.linear.is_residual_projection = cfg.residual
        self.norm = NORMS[cfg.norm](cfg.width)
        self.act = ACTIVATIONS[cfg.activation]()
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(self.act(self.norm(self.linear(x))))
        return x + h if self.residual else h


class MLP(nn.Module):
    fsdp_units = ("HiddenLayer",)  # parallel=fsdp shards each of these as a unit: hidden layers
    Config = MLPConfig

    def __init__(self, cfg: MLPConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.n_layer = cfg.depth
        self.stem = nn.Sequential(nn.Linear(cfg.in_features, cfg.width), ACTIVATIONS[cfg.activation]())
        self.hidden = nn.ModuleList(HiddenLayer(cfg) for _ in range(cfg.depth - 1))
        self.head = nn.Linear(cfg.width, cfg.out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x.flatten(1))  # images and other shaped samples are read as vectors
        for layer in self.hidden:
            x = layer(x)
        return self.head(x)
