"""The `model` config group: `_target_` names the class; our models carry a typed Config.

A class with a nested `Config` dataclass gets the group's keys type-checked into it, and the
fields the data decides (vocab_size, block_size, in/out features) filled in. Any other
callable (`model._target_=mypkg.Net`) is called with the keys the user set (never the defaults
of the option it replaced, see keys.py), plus those data fields its signature names.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from functools import partial
from typing import Any

from omegaconf import DictConfig
from torch import nn

from harness.core.callables import accepted_fields, call, check_accepts, locate
from harness.data import DataMeta
from harness.data.base import MODEL_FIELDS
from harness.core.errors import ConfigError, one_line
from harness.models.keys import user_keys
from harness.models.code_trace import recording_sites
from harness.core.typed_config import read_typed

LM_MODELS = ("harness.models.gpt.GPT", "harness.models.rnn.RNNLM")
VECTOR_MODELS = ("harness.models.mlp.MLP", "harness.models.resnet.ResNet")


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """The `model` group, read: the class `_target_` names and either its typed Config (a class that
    carries one, as ours do) or the keys the user set (any other callable)."""

    path: str
    target: Any
    config: Any | None  # the class's Config dataclass, the group's keys checked into it
    kwargs: dict[str, Any]  # a plain callable's keyword arguments


def model_spec(cfg: DictConfig) -> ModelSpec:
    """The group's keys checked into the model's Config dataclass (harness/core/typed_config.py),
    or, for a plain callable, the user's keys: data facts (`model.block_size`, which the token data
    options read for their windows) reach it only through its signature, with the data's value."""
    path = cfg.get("_target_")
    target = locate("model._target_", path)
    if hasattr(target, "Config"):
        return ModelSpec(path, target, read_typed(user_keys(cfg), target.Config, "model", only_known_keys=True), {})
    kwargs = {k: v for k, v in user_keys(cfg).items() if k not in MODEL_FIELDS}
    check_accepts(target, kwargs, "model", path)
    return ModelSpec(path, target, None, kwargs)


def validate_model_config(cfg: DictConfig, task: str) -> ModelSpec:
    if cfg.get("_target_") in LM_MODELS and task != "lm":
        raise ConfigError("model", cfg._target_, f"a model for {task} data (model=mlp or resnet, or your own _target_)")
    if cfg.get("_target_") in VECTOR_MODELS and task == "lm":
        raise ConfigError("model", cfg._target_, "a sequence model (model=gpt or rnn) for character/token data")
    return model_spec(cfg)


def build_model(spec: ModelSpec, meta: DataMeta) -> nn.Module:
    data = meta.model_fields()
    if getattr(spec.target, "needs_images", False) and len(meta.input_shape or ()) != 3:
        raise ConfigError("model", spec.path, f"image data with [channels, height, width] samples (data=digits, "
                                              f"or your own dataset); this data's samples are {meta.input_shape or 'vectors'}")
    if spec.config is not None:
        names = {f.name for f in dataclasses.fields(spec.config)}
        config = dataclasses.replace(spec.config, **{k: v for k, v in data.items() if k in names})
        target, kwargs = partial(spec.target, config), {}
    else:
        target, kwargs = spec.target, {**built_arguments(spec.kwargs), **accepted_fields(spec.target, data)}
    with recording_sites():  # the user's lines that build each module, for the code checks to quote
        model = call(target, kwargs, "model._target_", spec.path, "a model that builds")
    if not isinstance(model, nn.Module):
        raise ConfigError("model._target_", spec.path, f"a callable that returns a torch.nn.Module, "
                                                       f"not a {type(model).__name__}")
    return model


def built_arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    """A key holding its own `_target_` (`+model.config._target_=transformers.BertConfig`) is built,
    with its other keys as arguments, as Hydra's `instantiate` builds nested nodes; the rest as set."""
    from hydra.utils import instantiate

    built = {}
    for key, value in kwargs.items():
        if isinstance(value, Mapping) and "_target_" in value:
            locate(f"model.{key}._target_", value["_target_"])  # a missing module or name: its own line
            try:
                value = instantiate(value)
            except Exception as err:  # noqa: BLE001 - the user's class raised while being built
                raise ConfigError(f"model.{key}._target_", value["_target_"],
                                  f"a class or function that builds from the keys set under model.{key}: "
                                  f"{one_line(err)}") from None
        built[key] = value
    return built
