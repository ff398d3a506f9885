"""The `data` config group: one builder that returns train/val datasets and what the model must know."""
from __future__ import annotations

from omegaconf import DictConfig

from harness.data.base import DataMeta, Dataset
from harness.data.chars import build_stdlib, build_text, validate_stdlib, validate_text
from harness.data.synthetic import build_synthetic, validate_synthetic
from harness.data.tokens import build_tokens, validate_tokens
from harness.errors import ConfigError

# option name -> (validate, build); validate reads no more than file metadata.
BUILDERS = {
    "stdlib": (validate_stdlib, build_stdlib),
    "text": (validate_text, build_text),
    "tokens": (validate_tokens, build_tokens),
    "synthetic": (validate_synthetic, build_synthetic),
}

__all__ = ["DataMeta", "Dataset", "build_data", "validate_data_config"]


def validate_data_config(cfg: DictConfig) -> None:
    """Fail fast on data settings that cannot work (before any file is read in full)."""
    name = cfg.get("name")
    if name not in BUILDERS:
        raise ConfigError("data.name", name, f"one of {sorted(BUILDERS)}")
    if "block_size" in cfg and (not isinstance(cfg.block_size, int) or cfg.block_size < 1):
        raise ConfigError("data.block_size", cfg.block_size, "an integer >= 1")
    if "val_fraction" in cfg and not 0.0 < float(cfg.val_fraction) < 1.0:
        raise ConfigError("data.val_fraction", cfg.val_fraction, "a number in (0, 1)")
    validate, _ = BUILDERS[name]
    validate(cfg)


def build_data(cfg: DictConfig) -> tuple[Dataset, Dataset, DataMeta]:
    """Build (train, val, meta) for the configured data option."""
    validate_data_config(cfg)
    _, build = BUILDERS[cfg.name]
    return build(cfg)
