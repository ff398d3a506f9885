"""A small pre-activation ResNet for image tensors, with the switches (norm, residual) that decide
whether a deep CNN trains at all: batch norm and identity shortcuts are what keep gradients alive
through depth, and batch norm is also the classic source of a train/eval gap."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from harness.models.checks import Problem, size_and_dropout_problems

GROUPS = 8  # GroupNorm's groups (Wu & He's default); fewer when a layer has fewer channels
NORMS = ("batch", "group", "layer", "none")


@dataclass
class ResNetConfig:
    input_shape: tuple = ()
    """Filled in from the data: one image's [channels, height, width]."""
    out_features: int = 0
    """Filled in from the data (classes)."""
    stages: int = 3
    """Each stage after the first halves the resolution and doubles the channels."""
    blocks_per_stage: int = 2
    """Residual blocks per stage; each holds two 3x3 convolutions."""
    width: int = 16
    """Channels of the first stage."""
    norm: str = "batch"
    """batch | group | layer | none. Batch norm depends on the micro-batch; group/layer norm do not."""
    bn_momentum: float = 0.1
    """norm=batch: weight of each batch in the running statistics eval mode uses (torch's convention:
    Keras' momentum=0.99 is 0.01 here). Too small, and eval normalises with stale statistics."""
    residual: bool = True
    """Identity (or 1x1) shortcuts around every block; false makes a plain deep CNN."""
    dropout: float = 0.0
    """Before the classifier."""

    def problems(self) -> list[Problem]:
        problems = size_and_dropout_problems(self, ("stages", "blocks_per_stage", "width"))
        if self.norm not in NORMS:
            problems.append(("norm", self.norm, f"one of {list(NORMS)}"))
        if not 0.0 < self.bn_momentum <= 1.0:
            problems.append(("bn_momentum", self.bn_momentum, "a number in (0, 1]"))
        return problems


def _norm(cfg: ResNetConfig, channels: int) -> nn.Module:
    if cfg.norm == "batch":
        return nn.BatchNorm2d(channels, momentum=cfg.bn_momentum)
    if cfg.norm == "group":
        return nn.GroupNorm(min(GROUPS, channels), channels)
    if cfg.norm == "layer":
        return nn.GroupNorm(1, channels)  # one group: normalise over (C, H, W) per sample
    return nn.Identity()


class PreActBlock(nn.Module):
    """norm -> ReLU -> conv, twice, added to the shortcut (He et al. 2016, "Identity Mappings")."""

    def __init__(self, cfg: ResNetConfig, channels_in: int, channels_out: int, stride: int) -> None:
        super().__init__()
        self.residual = cfg.residual
        self.norm1 = _norm(cfg, channels_in)
        self.conv1 = nn.Conv2d(channels_in, channels_out, 3, stride=stride, padding=1, bias=False)
        self.norm2 = _norm(cfg, channels_out)
        self.conv2 = nn.Conv2d(channels_out, channels_out, 3, padding=1, bias=False)
        self.conv2.is_residual_projection = cfg.residual
        reshape = stride != 1 or channels_in != channels_out
        self.shortcut = nn.Conv2d(channels_in, channels_out, 1, stride=stride, bias=False) \
            if reshape and cfg.residual else None
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.norm1(x))
        skip = (self.shortcut(h) if self.shortcut is not None else x) if self.residual else None
        h = self.conv1(h)
        h = self.conv2(self.act(self.norm2(h)))
        return h + skip if skip is not None else h


class ResNet(nn.Module):
    fsdp_units = ("PreActBlock",)  # parallel=fsdp shards each of these as a unit: residual blocks
    Config = ResNetConfig
    needs_images = True  # build_model refuses data whose samples are not [C, H, W]

    def __init__(self, cfg: ResNetConfig) -> None:
        super().__init__()
        self.cfg = cfg
        channels = cfg.width
        self.stem = nn.Conv2d(cfg.input_shape[0], channels, 3, padding=1, bias=False)
        blocks = []
        for stage in range(cfg.stages):
            out = cfg.width * 2**stage
            for i in range(cfg.blocks_per_stage):
                blocks.append(PreActBlock(cfg, channels, out, stride=2 if stage and i == 0 else 1))
                channels = out
        self.blocks = nn.ModuleList(blocks)  # one flat list: per-layer statistics number the blocks 0..N-1
        self.n_layer = len(blocks)
        self.head_norm = _norm(cfg, channels)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(channels, cfg.out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        x = self.act(self.head_norm(x)).mean(dim=(2, 3))  # global average pool
        return self.head(self.drop(x))
