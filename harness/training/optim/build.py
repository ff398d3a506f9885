"""Turn the `optim` config group into a torch optimizer, and vet it before training.

Every key except `_target_` and the harness keys is passed straight to the
optimizer class, so any optimizer works; validation therefore checks the common
hyperparameters by name and then simply tries the constructor on a toy model,
translating its complaint into a one-line ConfigError.
"""
from __future__ import annotations

import math

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from harness.core.errors import ConfigError
from harness.training.optim.groups import NO_DECAY_KINDS, decay_param_groups
from harness.training.optim.muon import MuonWithAdamW, muon_param_groups
from harness.core.validation import is_number

# Keys read by the harness itself, never passed to the optimizer class.
HARNESS_KEYS = ("_target_", "no_decay", "head_names")
DEFAULT_HEAD_NAMES = ("lm_head", "head", "classifier")
TARGET_HELP = "an importable optimizer class path, e.g. torch.optim.AdamW"
BNB_HELP = 'bitsandbytes is not installed; it is an optional extra: pip install "stable-harness[bnb]"'
# bitsandbytes keeps 32-bit state for tensors smaller than this, so a probe must be at least this big.
BNB_PROBE_NUMEL = 4096


@dataclass(frozen=True)
class OptimSpec:
    """The `optim` group, checked: the optimizer class `_target_` names and the resolved node (the
    harness's grouping keys and the keyword arguments its constructor gets)."""

    cls: type[torch.optim.Optimizer]
    options: dict[str, Any]

    @property
    def path(self) -> str:
        return self.options["_target_"]


def validate_optim_config(cfg: DictConfig) -> OptimSpec:
    """Raise ConfigError for the first bad `optim` setting; needs no model and takes milliseconds.

    cfg may be the whole run config or just its `optim` node.
    """
    options = _options(cfg)
    cls = resolve_target(options.get("_target_"))
    _check_values(options)
    # On the meta device: no memory, and no draws from the RNG that seeds the real model.
    probe = nn.Sequential(nn.Linear(2, 2, device="meta"), nn.LayerNorm(2, device="meta"))
    _construct(cls, _param_groups(cls, options, probe), _kwargs(options))
    return OptimSpec(cls, options)


def build_optimizer(spec: OptimSpec, model: nn.Module) -> torch.optim.Optimizer:
    """The configured optimizer over model's trainable parameters, grouped for weight decay."""
    groups = _param_groups(spec.cls, spec.options, model)
    if not groups:
        raise ValueError("the model has no trainable parameters (all have requires_grad=False)")
    kwargs = _kwargs(spec.options)
    if spec.path.startswith("bitsandbytes."):
        _check_runs_on(spec.path, spec.cls, kwargs, groups[0]["params"][0].device)
    return _construct(spec.cls, groups, kwargs)


def resolve_target(path: Any) -> type[torch.optim.Optimizer]:
    """Import the optimizer class named by `optim._target_`."""
    if not isinstance(path, str) or "." not in path:
        raise ConfigError("optim._target_", path, TARGET_HELP)
    module_name, _, attr = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        if path.startswith("bitsandbytes."):
            raise ConfigError("optim._target_", path, BNB_HELP) from exc
        raise ConfigError("optim._target_", path, TARGET_HELP) from exc
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
        raise ConfigError("optim._target_", path, TARGET_HELP)
    return cls


def _options(cfg: DictConfig) -> dict[str, Any]:
    """The resolved `optim` node as plain Python, whether given the root or the node."""
    node = cfg.optim if "optim" in cfg and "_target_" not in cfg else cfg
    options = OmegaConf.to_container(node, resolve=True)
    assert isinstance(options, dict)
    return options


def _kwargs(options: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor kwargs: non-harness keys, lists as tuples (torch wants betas=(b1, b2))."""
    return {
        key: tuple(value) if isinstance(value, list) else value
        for key, value in options.items()
        if key not in HARNESS_KEYS
    }


def _param_groups(cls: type, options: Mapping[str, Any], model: nn.Module) -> list[dict[str, Any]]:
    no_decay = options.get("no_decay", NO_DECAY_KINDS)
    if issubclass(cls, MuonWithAdamW):
        return muon_param_groups(model, no_decay, options.get("head_names", DEFAULT_HEAD_NAMES))
    return decay_param_groups(model, no_decay)


# How torch's optimizers name a bad argument in their messages ("Invalid epsilon value: -1").
TORCH_WORDS = {"epsilon": "eps", "learning rate": "lr", "beta parameter": "betas"}


def _is_number(value: Any) -> bool:
    """A finite int or float: inf and nan train for a step, then poison every weight."""
    return is_number(value) and math.isfinite(value)


def _check_values(options: Mapping[str, Any]) -> None:
    """Range checks on the hyperparameters most optimizers share, by key name."""
    lr = options.get("lr")
    if "lr" in options and not (_is_number(lr) and lr > 0):
        raise ConfigError("optim.lr", lr, "a finite number > 0")
    adamw_lr = options.get("adamw_lr")
    if adamw_lr is not None and not (_is_number(adamw_lr) and adamw_lr > 0):
        raise ConfigError("optim.adamw_lr", adamw_lr, "a finite number > 0, or null for the default")
    for key in ("weight_decay", "adamw_weight_decay"):
        value = options.get(key)
        if key in options and not (_is_number(value) and value >= 0):
            raise ConfigError(f"optim.{key}", value, "a number >= 0")
    for key in ("betas", "adamw_betas"):
        value = options.get(key)
        if key in options and not (
            isinstance(value, list) and len(value) == 2 and all(_is_number(b) and 0 <= b < 1 for b in value)
        ):
            raise ConfigError(f"optim.{key}", value, "two numbers in [0, 1), e.g. [0.9, 0.999]")
    value = options.get("momentum")
    if "momentum" in options and not (_is_number(value) and 0 <= value < 1):
        raise ConfigError("optim.momentum", value, "a number in [0, 1)")
    value = options.get("no_decay", [])
    if not (isinstance(value, list) and set(value) <= set(NO_DECAY_KINDS)):
        raise ConfigError("optim.no_decay", value, f"a list drawn from {list(NO_DECAY_KINDS)}, or []")
    value = options.get("head_names", [])
    if not (isinstance(value, list) and all(isinstance(name, str) for name in value)):
        raise ConfigError("optim.head_names", value, "a list of module names, e.g. [lm_head]")


def _construct(cls: type, groups: list[dict[str, Any]], kwargs: dict[str, Any]) -> torch.optim.Optimizer:
    """cls(groups, **kwargs), with a constructor's TypeError/ValueError as a ConfigError."""
    try:
        return cls(groups, **kwargs)
    except (TypeError, ValueError) as exc:
        message = _first_line(exc)
        unexpected = re.search(r"unexpected keyword argument '(\w+)'", message)
        if unexpected and unexpected.group(1) in kwargs:
            key = unexpected.group(1)
            raise ConfigError(f"optim.{key}", kwargs[key], f"{message} ({cls.__name__} has no such option)") from exc
        named = [key for key in kwargs if re.search(rf"\b{re.escape(key)}\b", message)
                 or any(word in message.lower() and key == name for word, name in TORCH_WORDS.items())]
        if named:
            key = max(named, key=len)
            raise ConfigError(f"optim.{key}", kwargs[key], message) from exc
        raise ConfigError("optim", kwargs, message) from exc


def _check_runs_on(path: str, cls: type, kwargs: dict[str, Any], device: torch.device) -> None:
    """bitsandbytes imports fine on machines where its kernels cannot run; try one real step."""
    probe = torch.zeros(BNB_PROBE_NUMEL, device=device, requires_grad=True)
    probe.grad = torch.ones_like(probe)
    try:
        cls([probe], **kwargs).step()
    except Exception as exc:  # whatever the backend raises, the answer for the user is the same
        raise ConfigError(
            "optim._target_",
            path,
            f"bitsandbytes cannot run on device {device} ({_first_line(exc)}); "
            "use a CUDA GPU or another optimizer, e.g. optim=adamw",
        ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
