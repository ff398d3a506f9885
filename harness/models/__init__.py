"""The `model` config group: `_target_` names the class; our models carry a typed Config.

A class with a nested `Config` dataclass gets the group's keys type-checked into it, and the
fields the data decides (vocab_size, block_size, in/out features) filled in. Any other
callable (`model._target_=mypkg.Net`) is called with the group's keys, plus those data fields
its signature asks for.
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch import nn

from harness.data import DataMeta
from harness.errors import ConfigError

LM_MODELS = ("harness.models.gpt.GPT",)
VECTOR_MODELS = ("harness.models.mlp.MLP",)


def _target(cfg: DictConfig) -> Any:
    path = cfg.get("_target_")
    try:
        return get_object(path)
    except Exception:
        raise ConfigError("model._target_", path, "an importable class or function path, e.g. mypkg.models.Net") from None


def _user_keys(cfg: DictConfig) -> dict[str, Any]:
    return {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k != "_target_"}


def _data_fields(meta: DataMeta) -> dict[str, int]:
    fields = {"vocab_size": meta.vocab_size, "block_size": meta.block_size,
              "in_features": meta.in_features, "out_features": meta.out_features}
    return {k: v for k, v in fields.items() if v is not None}


def _typed_config(target: Any, cfg: DictConfig) -> Any:
    """Merge the group's keys into the model's Config dataclass: wrong types and unknown keys fail here."""
    try:
        typed = OmegaConf.merge(OmegaConf.structured(target.Config), _user_keys(cfg))
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or "model"
        allowed = [f.name for f in dataclasses.fields(target.Config)]
        raise ConfigError(f"model.{key}", getattr(err, "value", None),
                          f"{type(err).__name__}: a key of {allowed} with the right type") from None
    config = OmegaConf.to_object(typed)
    for key, value, allowed in config.validate():
        raise ConfigError(f"model.{key}", value, allowed)
    return config


def validate_model_config(cfg: DictConfig, task: str) -> None:
    target = _target(cfg)
    if cfg._target_ in LM_MODELS and task != "lm":
        raise ConfigError("model", cfg._target_, "a vector model (model=mlp) for data=synthetic")
    if cfg._target_ in VECTOR_MODELS and task == "lm":
        raise ConfigError("model", cfg._target_, "a sequence model (model=gpt) for character/token data")
    if hasattr(target, "Config"):
        _typed_config(target, cfg)


def build_model(cfg: DictConfig, meta: DataMeta) -> nn.Module:
    target = _target(cfg)
    data = _data_fields(meta)
    if hasattr(target, "Config"):
        config = _typed_config(target, cfg)
        names = {f.name for f in dataclasses.fields(config)}
        config = dataclasses.replace(config, **{k: v for k, v in data.items() if k in names})
        return target(config)
    params = inspect.signature(target).parameters
    kwargs = _user_keys(cfg)
    kwargs.update({k: v for k, v in data.items() if k in params and k not in kwargs})
    return target(**kwargs)
