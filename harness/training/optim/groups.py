"""Split a model's parameters into optimizer param groups.

Weight decay pulls weights towards zero, which is only meaningful for weight
matrices: decaying biases, normalisation gains or embedding rows mostly hurts,
so those are sorted out here by what they are rather than by fragile name
patterns.
"""
from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from torch import nn

NO_DECAY_KINDS = ("bias", "norm", "embedding")

NORM_TYPES: tuple[type[nn.Module], ...] = (
    nn.LayerNorm,
    nn.RMSNorm,
    nn.GroupNorm,
    nn.BatchNorm1d,
    nn.BatchNorm2d,
    nn.BatchNorm3d,
    nn.SyncBatchNorm,
    nn.InstanceNorm1d,
    nn.InstanceNorm2d,
    nn.InstanceNorm3d,
)
EMBEDDING_TYPES: tuple[type[nn.Module], ...] = (nn.Embedding, nn.EmbeddingBag)


@dataclass(frozen=True, eq=False)
class ParamInfo:
    """A trainable parameter with every kind any of its owners gives it.

    kinds is a subset of {"bias", "norm", "embedding", "head"}; a weight tied
    between an embedding and an output head carries both "embedding" and "head".
    """

    param: nn.Parameter
    kinds: frozenset[str]


def classify_params(model: nn.Module, head_names: Collection[str] = ()) -> list[ParamInfo]:
    """Trainable parameters of model, each once (by identity), in model order.

    A parameter of a module whose dotted name has a component in head_names is
    tagged "head". Non-bias parameters with fewer than 2 dims count as "norm"
    (gains and scales behave like normalisation weights).
    """
    heads = set(head_names)
    params: dict[int, nn.Parameter] = {}
    kinds: dict[int, set[str]] = {}
    for module_name, module in model.named_modules(remove_duplicate=False):
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad:
                continue
            params.setdefault(id(param), param)
            tags = kinds.setdefault(id(param), set())
            if isinstance(module, EMBEDDING_TYPES):
                tags.add("embedding")
            if isinstance(module, NORM_TYPES):
                tags.add("norm")
            if param_name == "bias":
                tags.add("bias")
            elif param.ndim < 2:
                tags.add("norm")
            if heads.intersection(module_name.split(".")):
                tags.add("head")
    return [ParamInfo(params[key], frozenset(kinds[key])) for key in params]


def decays(info: ParamInfo, no_decay: Collection[str]) -> bool:
    """Whether weight decay applies, given the kinds listed in `no_decay`."""
    return not info.kinds.intersection(no_decay)


def named_groups(groups: Iterable[tuple[str, list[nn.Parameter], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Param-group dicts carrying a "name", with empty groups dropped (torch rejects them)."""
    return [{"name": name, "params": params, **options} for name, params, options in groups if params]


def decay_param_groups(model: nn.Module, no_decay: Collection[str]) -> list[dict[str, Any]]:
    """"decay" (optimizer's weight_decay) and "no_decay" (weight_decay 0) groups."""
    infos = classify_params(model)
    return named_groups(
        [
            ("decay", [i.param for i in infos if decays(i, no_decay)], {}),
            ("no_decay", [i.param for i in infos if not decays(i, no_decay)], {"weight_decay": 0.0}),
        ]
    )
