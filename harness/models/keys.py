"""Which `model.*` keys the user set, as opposed to the defaults of the option the group was composed from.

`python train.py model._target_=mypkg.Net +model.hidden=64` starts from the default option
(`model=gpt`), so the composed group still holds gpt's `n_layer`, `n_head`, ... Those must not
leak into the user's class; `hidden` must reach it, and so must any key the user named on the
command line, even with a value equal to the option's default.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

MODEL_OPTIONS = Path(__file__).resolve().parents[2] / "conf" / "model"


def composed_from(cfg: DictConfig) -> dict[str, Any] | None:
    """The file values of the option whose keys the group holds (the largest such option)."""
    keys = set(cfg.keys())
    options = [OmegaConf.to_container(OmegaConf.load(p)) for p in sorted(MODEL_OPTIONS.glob("*.yaml"))]
    return max((o for o in options if set(o) - {"_target_"} <= keys), key=len, default=None)


def command_line_keys(group: str) -> set[str]:
    """Keys of `group` named by this run's overrides (empty outside a Hydra app)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return set()
    named = set()
    for override in HydraConfig.get().overrides.task:
        key = override.split("=", 1)[0].lstrip("+~")
        if key.startswith(f"{group}."):
            named.add(key.split(".")[1])
    return named


def user_keys(cfg: DictConfig) -> dict[str, Any]:
    """The group's keys minus `_target_`, minus the untouched defaults of the option it came from
    when `_target_` now names another callable."""
    values = {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k != "_target_"}
    defaults = composed_from(cfg)
    if defaults is None or defaults.get("_target_") == cfg.get("_target_"):
        return values
    named = command_line_keys("model")
    return {k: v for k, v in values.items() if k in named or k not in defaults or defaults[k] != v}
