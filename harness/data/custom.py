"""`data=custom data._target_=mypkg.build`: your own map-style torch Datasets.

The factory returns `(train, val)` or `(train, val, test)` (or a dict with `train`, `val` and
maybe `test`); a test split is scored by mode=eval only, never trained or validated on. Samples are `(input,
target)` pairs or dicts (pick the fields with data.input_key / data.target_key) of tensors,
numpy arrays or numbers. The task is declared by `data.task`; the sizes the model needs are read
from the data when that is cheap and safe (`.classes`, `.num_classes`, `.vocab_size`, a
TensorDataset's labels, one sample's shape) and required otherwise.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torch.utils.data import Dataset, IterableDataset, TensorDataset

from harness.core.callables import call, check_accepts, locate
from harness.data.base import NO_TASK, SPLITS, TASKS, DataMeta, Splits
from harness.data.loader import SHARED_DATA_KEYS, BatchRecipe, fetch, peek
from harness.core.errors import ConfigError
from harness.core.validation import is_whole

log = logging.getLogger("harness")
# Keys the harness reads itself; every other key of the group is passed to the factory.
HARNESS_KEYS = {"name", "_target_", "task", "num_classes", "vocab_size", "input_key", "target_key", *SHARED_DATA_KEYS}


def factory_kwargs(cfg: DictConfig) -> dict[str, Any]:
    return {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k not in HARNESS_KEYS}


def _positive_or_null(cfg: DictConfig, key: str, minimum: int) -> None:
    value = cfg.get(key)
    if value is not None and (not is_whole(value) or value < minimum):
        raise ConfigError(f"data.{key}", value, f"null (read from the data) or an integer >= {minimum}")


@dataclass(frozen=True)
class CustomConfig:
    """`data=custom`, checked: the factory `_target_` names and the keys it is called with, the task,
    the sizes the config declares (null: read from the data) and how samples become a batch."""

    path: str
    factory: Callable[..., Any]
    kwargs: dict[str, Any]
    task: str | None  # None: no task; the batches go whole to the user's objective
    num_classes: int | None
    vocab_size: int | None
    recipe: BatchRecipe  # collate_fn, input_key, target_key: the first sample is read as training reads it


AUTO_TASK = "auto"  # no task beside your own objective, else classification (custom_task)


def custom_task(task: str | None, open_objective: bool) -> str | None:
    """`data.task=auto`, the default: none beside your own objective (loss._target_ or
    loss.function=model), which then gets each batch whole and the model each batch as it is;
    classification under the built-in loss. A task set by hand is kept."""
    if task != AUTO_TASK:
        return task
    return None if open_objective else "classification"


def validate_custom(cfg: DictConfig) -> CustomConfig:
    if cfg.get("task") is not None and cfg.get("task") not in (*TASKS, AUTO_TASK):
        raise ConfigError("data.task", cfg.get("task"), f"auto, one of {list(TASKS)}, or null (batches go whole to "
                                                        f"loss._target_)")
    _positive_or_null(cfg, "num_classes", 2)
    _positive_or_null(cfg, "vocab_size", 1)
    path = cfg.get("_target_")
    factory, kwargs = locate("data._target_", path), factory_kwargs(cfg)
    check_accepts(factory, kwargs, "data", path)
    recipe = BatchRecipe.from_config(cfg)
    task = custom_task(cfg.task, open_objective=False)  # a run's config has resolved auto already (its loss known)
    return CustomConfig(path=path, factory=factory, kwargs=kwargs, task=task, num_classes=cfg.get("num_classes"),
                        vocab_size=cfg.get("vocab_size"), recipe=recipe)


def _splits(result: Any, path: str) -> list[Dataset]:
    """[train, val] or [train, val, test]."""
    if isinstance(result, Mapping) and {"train", "val"} <= set(result):
        result = [result[name] for name in SPLITS if name in result]
    if not (isinstance(result, (tuple, list)) and len(result) in (2, 3)):
        raise ConfigError("data._target_", path, f"a factory that returns (train, val) or (train, val, test) "
                                                 f"datasets, not a {type(result).__name__}"
                                                 + (f" of {len(result)}" if isinstance(result, (tuple, list)) else ""))
    for split, dataset in zip(SPLITS, result):
        if isinstance(dataset, IterableDataset) or not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
            raise ConfigError("data._target_", path, f"map-style datasets (__getitem__ and __len__); the {split} "
                                                     f"one is a {type(dataset).__name__} (iterable/streaming "
                                                     f"datasets are not supported: exact resume needs random access)")
    return list(result)


def _declared_or_read(cfg: CustomConfig, key: str, dataset: Dataset, attrs: tuple[str, ...]) -> int:
    """The size the config declares, else one the dataset states, else a TensorDataset's max label + 1."""
    declared = getattr(cfg, key)
    if declared is not None:
        return int(declared)
    for attr in attrs:
        value = getattr(dataset, attr, None)
        if is_whole(value):
            return value
        if isinstance(value, (list, tuple, Mapping)) and value:
            return len(value)
    if isinstance(dataset, TensorDataset) and len(dataset.tensors) >= 2:
        labels = dataset.tensors[1]
        # one value, a class (a negative one marks ignored targets, which the label checks judge)
        if key == "num_classes" and not labels.is_floating_point() and int(labels.max()) == int(labels.min()) >= 0:
            raise ConfigError(f"data.{key}", None, f"an integer of at least 2: every training label of {cfg.path} "
                                                   f"is {int(labels.max())}, so no class count can be read from them "
                                                   "(labels divided or cast with the inputs?); fix the labels, or "
                                                   "declare data.num_classes")
        return int(labels.max()) + 1
    raise ConfigError(f"data.{key}", None, f"an integer: {cfg.path}'s datasets do not state it "
                                           f"(no {' / '.join('.' + a for a in attrs)} attribute)")


def _check_fields(cfg: CustomConfig, train: Dataset) -> None:
    """Dict samples name their fields: the input and target keys must be among them."""
    sample = peek(train, 0)
    if not isinstance(sample, Mapping):
        return
    fields = sorted(map(str, sample))
    read = set()
    for key in ("input_key", "target_key"):
        wanted = getattr(cfg.recipe, key)
        names = list(wanted) if isinstance(wanted, list) else [wanted]
        if wanted is None or any(n not in sample for n in names):
            raise ConfigError(f"data.{key}", wanted, f"a field of {cfg.path}'s dict samples: one of {fields} (or "
                                                     f"your own objective, loss._target_=mypkg.objective or "
                                                     f"loss.function=model, which gets whole batches with "
                                                     f"data.task=auto or null)")
        read.update(names)
    unread = [f for f in fields if f not in read]
    if unread:
        log.info("data: the samples' %s %s not read (data.input_key=%s, data.target_key=%s); to give the model or the "
                 "loss every field, name your objective: loss._target_=mypkg.objective (docs/bring-your-own.md)",
                 ", ".join(unread), "is" if len(unread) == 1 else "are", cfg.recipe.input_key, cfg.recipe.target_key)


def _pair_facts(cfg: CustomConfig, train: Dataset) -> DataMeta:
    """Without a task, `(input, label)` pairs still tell a model's constructor what they hold: the
    input's size and shape and, for integer labels, the class count where it can be read. Other
    samples (dicts, two views, one tensor) tell nothing: the model's own keys say it."""
    sample = peek(train, 0)
    if not isinstance(sample, (tuple, list)) or len(sample) != 2:
        return DataMeta(NO_TASK)
    try:
        x, y = (torch.as_tensor(item) for item in sample)
    except (TypeError, ValueError, RuntimeError):  # not tensors: nothing to tell
        return DataMeta(NO_TASK)
    classes = None
    if y.dim() == 0 and not y.is_floating_point() and y.dtype != torch.bool:
        try:
            classes = _declared_or_read(cfg, "num_classes", train, ("num_classes", "classes"))
        except ConfigError:  # a model that asks for it says so, naming data.num_classes
            classes = None
    return DataMeta(NO_TASK, in_features=x.numel(), input_shape=tuple(x.shape), out_features=classes)


def build_custom(cfg: CustomConfig) -> Splits:
    path = cfg.path
    result = call(cfg.factory, cfg.kwargs, "data._target_", path, "a factory that runs")
    train, val, *test = _splits(result, path)
    if len(train) == 0:
        raise ConfigError("data", "train", "a non-empty split: it has no samples")
    if cfg.task is None:  # batches go whole to the user's objective
        return Splits(train, val, _pair_facts(cfg, train), test[0] if test else None)
    _check_fields(cfg, train)
    x, y = fetch(train, cfg.recipe, torch.tensor([0]))
    x, y = x[0], y[0]
    if cfg.task == "lm":
        meta = DataMeta("lm", vocab_size=_declared_or_read(cfg, "vocab_size", train, ("vocab_size",)),
                        block_size=int(x.shape[-1]) if x.dim() else 1)
    elif cfg.task == "classification":
        meta = DataMeta("classification", out_features=_declared_or_read(cfg, "num_classes", train,
                                                                         ("num_classes", "classes")),
                        in_features=x.numel(), input_shape=tuple(x.shape))
    else:
        meta = DataMeta("regression", out_features=max(y.numel(), 1), in_features=x.numel(), input_shape=tuple(x.shape))
    return Splits(train, val, meta, test[0] if test else None)
