"""`key=value` overrides applied to a composed config as Hydra applies them: the one mechanism
LR scaling, mode=eval, the LR finder and the remedies derive a changed config with."""
from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from harness.core.config_keys import CONF_DIR


def overridden(cfg: DictConfig, overrides: Sequence[str]) -> DictConfig:
    """`cfg` with `key=value` overrides applied as Hydra applies them: a config group's name takes
    that option's whole node (precision=bf16), any other key its value read as YAML (1e-7 a float,
    null None)."""
    new = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    for override in overrides:
        key, value = override.split("=", 1)
        if (CONF_DIR / key).is_dir():
            option = OmegaConf.load(CONF_DIR / key / f"{value}.yaml")
            option.pop("defaults", None)
            new[key] = option
        else:
            OmegaConf.update(new, key, OmegaConf.create(f"value: {value}")["value"], merge=False)
    return new
