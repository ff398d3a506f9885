"""Keys that nothing reads are refused: `+trainer.max_stepz=10` must not run 1000 steps in silence.

The harness's own nodes (the run keys of conf/train.yaml and the config groups it reads: trainer,
schedule, guard, monitor, data options but `custom`, ...) may hold only the keys their option's
file defines. User-owned nodes take any key: `vars` (free-form, for your own interpolations),
`model`, `optim` and `callbacks` (their keys are the class's own: a model's Config or
signature, an optimizer's or callback's constructor, each checked where it is built), `data=custom` (the factory's keyword
arguments), `loss` with a `_target_` (the objective's own settings), and any value a file leaves null
or `{}` (a `collate_fn: {_target_: ..., arg: 1}`).
"""
from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from harness.core.errors import ConfigError

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
USER_NODES = ("vars", "model", "optim", "callbacks", "metrics", "hydra")  # checked elsewhere, or free
# What one invocation sets and a run's identity leaves aside: never carried over from a run's saved
# overrides on resume, and no difference between a checkpoint's config and the run resuming it.
PER_INVOCATION = ("resume", "overwrite", "trainer.stop_after", "mode", "eval.checkpoint")
FREE_DATA = "custom"  # data=custom: every key the harness does not read goes to the user's factory


@lru_cache(maxsize=None)
def _load(path: Path) -> dict[str, Any]:
    loaded = yaml.safe_load(path.read_text()) or {}
    return {k: v for k, v in loaded.items() if k != "defaults"}


def _union(trees: list[dict[str, Any]]) -> dict[str, Any]:
    """Every key any tree has; a key that is a mapping in every tree that has it is merged."""
    merged: dict[str, Any] = {}
    for tree in trees:
        for key, value in tree.items():
            both = isinstance(merged.get(key), dict) and isinstance(value, dict)
            merged[key] = _union([merged[key], value]) if both else merged.get(key, value) or value
    return merged


@lru_cache(maxsize=None)
def _groups() -> tuple[str, ...]:
    """The config groups of conf/train.yaml's defaults list."""
    defaults = yaml.safe_load((CONF_DIR / "train.yaml").read_text())["defaults"]
    names = (next(iter(d)) for d in defaults if isinstance(d, dict))
    return tuple(name for name in names if not name.startswith("override"))


def reference_keys(choices: Mapping[str, str] | None) -> dict[str, Any]:
    """The keys the harness's files define, by node: conf/train.yaml, plus each group's chosen
    option (every option of the group when the choices are unknown, as in `hydra.compose`)."""
    tree = dict(_load(CONF_DIR / "train.yaml"))
    for group in _groups():
        folder = CONF_DIR / group
        if group in USER_NODES:
            tree[group] = {}  # theirs: any key
            continue
        if not folder.is_dir() or _is_global(folder):
            continue
        choice = (choices or {}).get(group)
        files = [folder / f"{choice}.yaml"] if choice else sorted(folder.glob("*.yaml"))
        options = [_load(f) for f in files if f.is_file()]
        # a user's own option (from --config-dir) is theirs to define: {} takes any key
        tree[group] = _union([tree.get(group) or {}, *options]) if options else {}
    return tree


def _is_global(folder: Path) -> bool:
    """experiment, debug, hparams_search: their files set keys of other nodes, they are no node."""
    first = next(iter(sorted(folder.rglob("*.yaml"))), None)
    return first is not None and "@package _global_" in first.read_text()


def _unread(values: Mapping[str, Any], reference: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, list[str]]]:
    for key, value in values.items():
        if key not in reference:
            yield f"{prefix}{key}", [f"{prefix}{k}" for k in reference]
        elif isinstance(reference[key], dict) and reference[key] and isinstance(value, Mapping):
            yield from _unread(value, reference[key], f"{prefix}{key}.")


def missing_key_hint(key: str, value: str) -> str:
    """Advice for a key that is not in the config: the nearest key the harness reads, or (under a
    node of the user's own) how to add one."""
    top = key.split(".", 1)[0]
    if top in USER_NODES:
        return f"a key of your own is added with +{key}={value}"
    if top == "data":
        return f"a data=custom factory's own key is added with +{key}={value}"
    parent = key.rpartition(".")[0]
    prefix = f"{parent}." if parent else ""
    siblings = [f"{p}{k}" for p, k in _paths(reference_keys(None), "") if p == prefix]
    return _nearest(key, siblings) or "python train.py --cfg job lists the keys; yours go under +vars.NAME"


def _nearest(key: str, siblings: list[str]) -> str | None:
    """'did you mean X?' for the closest sibling key, if one is close."""
    near = difflib.get_close_matches(key, siblings, n=1, cutoff=0.6)
    return f"did you mean {near[0]}?" if near else None


def _paths(tree: Mapping[str, Any], prefix: str) -> Iterator[tuple[str, str]]:
    """(prefix, key) of every key in the tree, nested ones under their dotted prefix."""
    for key, value in tree.items():
        yield prefix, key
        if isinstance(value, dict):
            yield from _paths(value, f"{prefix}{key}.")


def check_known_keys(cfg: DictConfig, choices: Mapping[str, str] | None = None) -> None:
    """Refuse the first key under a harness-owned node that no file of the harness defines."""
    reference = reference_keys(choices)
    values = OmegaConf.to_container(cfg, resolve=False)
    skipped = [*USER_NODES, *(["data"] if values.get("data", {}).get("name") == FREE_DATA else []),
               *(["loss"] if values.get("loss", {}).get("_target_") is not None else [])]
    for key, siblings in _unread({k: v for k, v in values.items() if k not in skipped}, reference, ""):
        node = key.rpartition(".")[0]
        hint = _nearest(key, siblings) or f"python train.py --cfg job{f' -p {node}' if node else ''} lists the keys there"
        raise ConfigError(key, OmegaConf.select(cfg, key, throw_on_resolution_failure=False),
                          f"nothing reads this key ({hint}); keys of your own go under vars (+vars.NAME=...), "
                          f"or in your model's, optimizer's or data=custom factory's node")
