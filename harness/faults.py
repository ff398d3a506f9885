"""Fault injection (config group `fault`): break chosen steps on purpose to watch the guard work."""
from __future__ import annotations

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from harness.errors import ConfigError
from harness.validation import is_whole

KINDS = ("none", "nan_grad", "inf_loss", "spike")


def validate_fault_config(cfg: DictConfig) -> None:
    if cfg.get("name") not in KINDS:
        raise ConfigError("fault", cfg.get("name"), f"one of {list(KINDS)}")
    at = cfg.get("at")
    if at is not None and not OmegaConf.is_list(at):
        raise ConfigError("fault.at", at, "a list of optimizer steps >= 1, e.g. [5,9,13] (a single step is [5])")
    steps = list(at or [])
    if any(not is_whole(s) or s < 1 for s in steps):
        raise ConfigError("fault.at", steps, "a list of optimizer steps >= 1, e.g. [5,9,13]")


class FaultInjector:
    """Each listed step fires once, even when a rollback replays it."""

    def __init__(self, cfg: DictConfig, rank: int) -> None:
        self.kind = cfg.name
        self.steps = set(cfg.get("at") or [])
        self.scale = float(cfg.get("scale", 1000.0))
        self.applies_here = cfg.get("rank") is None or cfg.rank == rank
        self.fired: set[int] = set()
        self.armed = False

    def arm(self, step: int) -> None:
        """Called before the update numbered `step` (1-based)."""
        self.armed = self.kind != "none" and self.applies_here and step in self.steps and step not in self.fired
        if self.kind != "none" and step in self.steps:
            self.fired.add(step)

    def on_loss(self, loss: torch.Tensor) -> torch.Tensor:
        if self.armed and self.kind == "inf_loss":
            return loss * float("inf")
        if self.armed and self.kind == "spike":
            return loss * self.scale
        return loss

    def on_grads(self, params: list[nn.Parameter]) -> None:
        if self.armed and self.kind == "nan_grad":
            next(p for p in params if p.grad is not None).grad.fill_(float("nan"))

    def state_dict(self) -> dict:
        return {"fired": sorted(self.fired)}

    def load_state_dict(self, state: dict) -> None:
        self.fired = set(state["fired"])
