"""The `precision` config group: autocast dtype and, for fp16, dynamic loss scaling."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from omegaconf import DictConfig

from harness.core.errors import ConfigError
from harness.core.typed_config import read_typed, setting

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def validate_precision_config(cfg: DictConfig, device: torch.device) -> PrecisionConfig:
    name = cfg.get("name")
    if name not in DTYPES:
        raise ConfigError("precision", name, f"one of {list(DTYPES)}")
    if device.type == "cuda" and name == "bf16" and not torch.cuda.is_bf16_supported():
        raise ConfigError("precision", name, f"fp32 or fp16: {torch.cuda.get_device_name(device)} has no bfloat16")
    if device.type == "mps" and name != "fp32":
        raise ConfigError("precision", name, "fp32 on mps (autocast with loss scaling is not supported there)")
    return read_typed(cfg, PrecisionConfig, "precision")


@dataclass(frozen=True)
class PrecisionConfig:
    """Every key a precision option may set (fp16's loss scaler has the rest)."""

    name: str = "fp32"
    init_scale: float = setting(65536.0, "a number > 0", lambda v: v > 0)
    growth_interval: int = setting(2000, "an integer >= 1", lambda v: v >= 1)
    loss_scaling: bool = setting(True, "true or false")


@dataclass
class Precision:
    """Autocast plus an (fp16-only) GradScaler; the other precisions get a disabled scaler,
    whose scale/unscale_/update are no-ops, so the training step reads the same for all three."""

    name: str
    device_type: str
    scaler: torch.amp.GradScaler

    def autocast(self) -> contextlib.AbstractContextManager:
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=DTYPES[self.name])

    @property
    def scaling(self) -> bool:
        return self.scaler.is_enabled()


def build_precision(settings: PrecisionConfig, device: torch.device) -> Precision:
    scaler = torch.amp.GradScaler(device.type, enabled=settings.name == "fp16" and settings.loss_scaling,
                                  init_scale=float(settings.init_scale), growth_interval=settings.growth_interval)
    return Precision(settings.name, device.type, scaler)


class ScalerState:
    """The loss scaler's checkpoint entry. A run resumed with loss scaling switched on or off (the
    fp16_underflow remedy turns it on mid-run) starts the new scaler fresh: a disabled scaler
    saves nothing, and an enabled one has no scale to take from it."""

    def __init__(self, scaler: torch.amp.GradScaler) -> None:
        self.scaler = scaler

    def state_dict(self) -> dict:
        return self.scaler.state_dict()

    def load_state_dict(self, state: dict) -> None:
        if state and self.scaler.is_enabled():
            self.scaler.load_state_dict(state)

