"""Fault injection (config group `fault`): break chosen steps on purpose to watch the guard work."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from omegaconf import DictConfig
from torch import nn

from harness.core.typed_config import Problem, at_least, one_of, read_typed, setting
from harness.core.validation import is_whole

KINDS = ("none", "nan_grad", "inf_loss", "spike")


AT_ALLOWED = "a list of optimizer steps >= 1, e.g. [5,9,13] (a single step is [5])"


@dataclass(frozen=True)
class FaultConfig:
    name: str = setting("none", f"one of {list(KINDS)}", one_of(KINDS))
    at: list | None = setting(None, AT_ALLOWED)
    scale: float = setting(1000.0, "a number: the factor a spike multiplies the loss by")
    rank: int | None = setting(None, "null (every rank) or the rank to break", at_least(0))

    def problems(self) -> list[Problem]:
        steps = list(self.at or [])
        if any(not is_whole(s) or s < 1 for s in steps):
            return [("at", steps, "a list of optimizer steps >= 1, e.g. [5,9,13]")]
        return []


def fault_config(cfg: DictConfig) -> FaultConfig:
    return read_typed(cfg, FaultConfig, "fault")


class FaultInjector:
    """Each listed step fires once, even when a rollback replays it."""

    def __init__(self, settings: FaultConfig, rank: int) -> None:
        self.kind = settings.name
        self.steps = set(settings.at or [])
        self.scale = float(settings.scale)
        self.applies_here = settings.rank is None or settings.rank == rank
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
