"""The `metrics` config node: named entries, each a `_target_` and its arguments, like `callbacks`.

`+metrics.f1._target_=torchmetrics.classification.MultilabelF1Score +metrics.f1.num_labels=5` builds an
object with `update` / `compute` / `reset`; a function `metric(output, batch)` is called per batch. Two
keys are the harness's own and never reach the metric: `inputs` (a function `pick(output, batch) ->
(preds, target)`, what an object metric is fed under your own objective) and `higher_is_better`
(which way is better, where the metric does not say itself). An entry set to null is off."""
from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from harness.core.callables import check_accepts, locate
from harness.core.errors import ConfigError

INPUTS, HIGHER_IS_BETTER = "inputs", "higher_is_better"  # the entry's keys the harness reads itself
BUILT_IN = ("loss", "accuracy", "label_accuracy", "perplexity", "effective_rank", "loss_on_train")  # val/ names taken
NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
MODE_OF = {True: "max", False: "min", None: None}  # higher_is_better -> the monitor's mode


@dataclass(frozen=True)
class MetricSpec:
    """One entry of the `metrics` node, checked: what its `_target_` names and how it is fed."""

    name: str
    path: str
    target: Any  # a class (built once with `kwargs`) or a function (called per batch with `kwargs`)
    kwargs: dict[str, Any]
    inputs: Callable[[Any, Any], tuple[Any, Any]] | None = None
    inputs_path: str | None = None
    higher_is_better: bool | None = None  # as the entry says; None: the metric's own attribute, if any

    @property
    def is_function(self) -> bool:
        return not inspect.isclass(self.target)

    @property
    def declared_higher_is_better(self) -> bool | None:
        """Which way is better, as the entry or the metric's class says it (torchmetrics' classes do)."""
        if self.higher_is_better is not None:
            return self.higher_is_better
        declared = getattr(self.target, "higher_is_better", None)
        return declared if isinstance(declared, bool) else None


def validate_metrics_config(node: Any) -> dict[str, MetricSpec]:
    """name -> its spec, in the order the config lists them; entries set to null are left out."""
    if node is None:
        return {}
    if not isinstance(node, (Mapping, DictConfig)):
        raise ConfigError("metrics", node, "named entries, e.g. +metrics.f1._target_=torchmetrics.classification."
                                           "MultilabelF1Score +metrics.f1.num_labels=5")
    specs = {}
    for name, entry in node.items():
        if entry is None:
            continue
        key = f"metrics.{name}"
        if not NAME.match(str(name)) or name in BUILT_IN:
            raise ConfigError(key, entry, f"a name of letters, digits and _ that is not one the harness logs itself "
                                          f"({', '.join(BUILT_IN)})")
        if not isinstance(entry, (Mapping, DictConfig)) or "_target_" not in entry:
            raise ConfigError(key, entry, "a node with a _target_ (a torchmetrics Metric, an object with update/"
                                          "compute/reset, or a function metric(output, batch)) and its arguments, "
                                          "or null to turn it off")
        plain = OmegaConf.to_container(entry, resolve=True) if isinstance(entry, DictConfig) else dict(entry)
        path = plain.pop("_target_")
        target = locate(f"{key}._target_", path)
        inputs_path = plain.pop(INPUTS, None)
        inputs = locate(f"{key}.{INPUTS}", inputs_path) if inputs_path is not None else None
        if inputs is not None and not callable(inputs):
            raise ConfigError(f"{key}.{INPUTS}", inputs_path, "a function pick(output, batch) -> (preds, target)")
        higher = plain.pop(HIGHER_IS_BETTER, None)
        if higher is not None and not isinstance(higher, bool):
            raise ConfigError(f"{key}.{HIGHER_IS_BETTER}", higher, "null (the metric's own), true or false")
        if not callable(target):
            raise ConfigError(f"{key}._target_", path, "a metric class or a function metric(output, batch)")
        if inspect.isclass(target):
            check_accepts(target, plain, key, path)
        specs[str(name)] = MetricSpec(str(name), str(path), target, plain, inputs, inputs_path, higher)
    return specs
