"""The `model` config group: `_target_` names the class; our models carry a typed Config.

A class with a nested `Config` dataclass gets the group's keys type-checked into it, and the
fields the data decides (vocab_size, block_size, in/out features) filled in. Any other
callable (`model._target_=mypkg.Net`) is called with the keys the user set (never the defaults
of the option it replaced, see keys.py), plus those data fields its signature names.
"""
from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

from omegaconf import DictConfig
from torch import nn

from harness.core.callables import accepted_fields, call, check_accepts, locate
from harness.data import DataMeta
from harness.data.base import MODEL_FIELDS
from harness.core.errors import ConfigError
from harness.models.keys import user_keys
from harness.core.typed_config import read_typed

LM_MODELS = ("harness.models.gpt.GPT", "harness.models.rnn.RNNLM")
VECTOR_MODELS = ("harness.models.mlp.MLP", "harness.models.resnet.ResNet")


def _target(cfg: DictConfig) -> Any:
    return locate("model._target_", cfg.get("_target_"))


def _typed_config(target: Any, cfg: DictConfig) -> Any:
    """The group's keys checked into the model's Config dataclass (harness/core/typed_config.py)."""
    return read_typed(user_keys(cfg), target.Config, "model", only_known_keys=True)


def _plain_keys(cfg: DictConfig) -> dict[str, Any]:
    """The user's keys for a plain callable. Data facts (`model.block_size`, which the token data
    options read for their windows) reach it only through its signature, with the data's value."""
    return {k: v for k, v in user_keys(cfg).items() if k not in MODEL_FIELDS}


def validate_model_config(cfg: DictConfig, task: str) -> None:
    target = _target(cfg)
    if cfg._target_ in LM_MODELS and task != "lm":
        raise ConfigError("model", cfg._target_, f"a model for {task} data (model=mlp or resnet, or your own _target_)")
    if cfg._target_ in VECTOR_MODELS and task == "lm":
        raise ConfigError("model", cfg._target_, "a sequence model (model=gpt or rnn) for character/token data")
    if hasattr(target, "Config"):
        _typed_config(target, cfg)
    else:
        check_accepts(target, _plain_keys(cfg), "model", cfg._target_)


def build_model(cfg: DictConfig, meta: DataMeta) -> nn.Module:
    target = _target(cfg)
    data = meta.model_fields()
    if getattr(target, "needs_images", False) and len(meta.input_shape or ()) != 3:
        raise ConfigError("model", cfg._target_, f"image data with [channels, height, width] samples (data=digits, "
                                                 f"or your own dataset); this data's samples are {meta.input_shape or 'vectors'}")
    if hasattr(target, "Config"):
        config = _typed_config(target, cfg)
        names = {f.name for f in dataclasses.fields(config)}
        config = dataclasses.replace(config, **{k: v for k, v in data.items() if k in names})
        model = call(partial(target, config), {}, "model._target_", cfg._target_, "a model that builds")
    else:
        kwargs = {**_plain_keys(cfg), **accepted_fields(target, data)}
        model = call(target, kwargs, "model._target_", cfg._target_, "a model that builds")
    if not isinstance(model, nn.Module):
        raise ConfigError("model._target_", cfg._target_, f"a callable that returns a torch.nn.Module, "
                                                           f"not a {type(model).__name__}")
    return model
