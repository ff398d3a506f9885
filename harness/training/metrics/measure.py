"""The metrics of one eval pass, exact over the whole scored split in memory that does not grow with it:
each keeps a state updated per batch (a torchmetrics Metric's counts, a function's running sum and
count), reduced over every rank and computed once per pass. A mean of per-batch F1s is not the split's
F1; the split's counts give it."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import torch

from harness.core.callables import call
from harness.core.distributed import DistInfo, all_reduce_mean
from harness.core.errors import ConfigError, one_line
from harness.data.batch import describe_batch
from harness.training.metrics.spec import INPUTS, MODE_OF, MetricSpec



class Measured(Protocol):
    name: str
    mode: str | None  # min | max | None (not known)
    key: str  # the config key an error names, and the dotted path it holds
    path: str

    def reset(self) -> None: ...

    def update(self, output: Any, batch: Any, samples: torch.Tensor) -> None: ...

    def compute(self) -> float: ...


class FunctionMetric:
    """`metric(output, batch)` -> the batch's mean (a 0-dim tensor, weighted by the batch's samples) or
    `{"sum": ..., "count": ...}`: a running sum and count, so the split's value is their ratio."""

    def __init__(self, name: str, fn: Callable[..., Any], kwargs: dict[str, Any], mode: str | None,
                 device: torch.device, dist: DistInfo, key: str, path: str) -> None:
        self.name, self.fn, self.kwargs, self.mode, self.dist = name, fn, kwargs, mode, dist
        self.key, self.path = key, path
        self.total = torch.zeros(2, device=device)

    def reset(self) -> None:
        self.total.zero_()

    def update(self, output: Any, batch: Any, samples: torch.Tensor) -> None:
        value = self.fn(output, batch, **self.kwargs)
        if isinstance(value, dict) and set(value) == {"sum", "count"}:
            pair = [_number(value["sum"]), _number(value["count"])]
        elif isinstance(value, torch.Tensor) and value.numel() == 1:
            pair = [value.detach().float().reshape(()) * samples, samples.float()]
        else:
            raise ConfigError(self.key, self.path, f"a function metric returning a 0-dim tensor (the batch's mean) "
                                                   f"or {{'sum': ..., 'count': ...}}: it returned {describe_batch(value)}")
        self.total += torch.stack([p.to(self.total.device, torch.float32) for p in pair])

    def compute(self) -> float:
        total, count = all_reduce_mean(self.total, self.dist).tolist()
        return total / count if count else math.nan


class ObjectMetric:
    """An object with update / compute / reset (a torchmetrics Metric), fed `(preds, target)`: the
    model's logits and the batch's targets on the built-in path, what `inputs` picks under your own
    objective. A torchmetrics Metric reduces its state over the ranks itself when it computes."""

    def __init__(self, name: str, metric: Any, pick: Callable[[Any, Any], tuple[Any, Any]], mode: str | None,
                 key: str, path: str) -> None:
        self.name, self.metric, self.pick, self.mode, self.key, self.path = name, metric, pick, mode, key, path

    def reset(self) -> None:
        self.metric.reset()

    def update(self, output: Any, batch: Any, samples: torch.Tensor) -> None:
        preds, target = self.pick(output, batch)
        self.metric.update(preds, target)

    def compute(self) -> float:
        value = self.metric.compute()
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            return float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise ConfigError(self.key, self.path, f"a metric whose compute() returns one number: it returned "
                                               f"{describe_batch(value)} (a per-class metric: average='macro')")


def _number(value: Any) -> torch.Tensor:
    return value.detach().reshape(()) if isinstance(value, torch.Tensor) else torch.tensor(float(value))


def logits_and_targets(flatten: bool) -> Callable[[Any, Any], tuple[Any, Any]]:
    """The built-in path's (preds, target): token logits [B, T, V] flattened to [B*T, V] against [B*T]."""
    def pick(output: torch.Tensor, batch: tuple[Any, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        target = batch[1]
        return (output.reshape(-1, output.shape[-1]), target.reshape(-1)) if flatten else (output, target)
    return pick


def build_metric(spec: MetricSpec, *, open_objective: bool, flatten: bool, device: torch.device,
                 dist: DistInfo) -> Measured:
    """One configured metric, built; every way it cannot be measured fails here in one line."""
    key, path = f"metrics.{spec.name}._target_", spec.path
    if spec.is_function:
        if spec.inputs is not None:
            raise ConfigError(f"metrics.{spec.name}.{INPUTS}", spec.inputs_path, "null for a function metric: it "
                                                                                 "gets (output, batch) itself")
        return FunctionMetric(spec.name, spec.target, spec.kwargs, MODE_OF[spec.higher_is_better], device, dist, key,
                              path)
    if open_objective and spec.inputs is None:
        raise ConfigError(f"metrics.{spec.name}.{INPUTS}", None, "a function pick(output, batch) -> (preds, target): "
                                                                 "under your own objective the harness does not "
                                                                 "know which part of the output and batch to feed it")
    metric = call(spec.target, spec.kwargs, key, path, "a metric that builds")
    missing = [m for m in ("update", "compute", "reset") if not callable(getattr(metric, m, None))]
    if missing:
        raise ConfigError(key, path, f"a metric: an object with update, compute and reset (it lacks "
                                     f"{', '.join(missing)}), or a function metric(output, batch)")
    if dist.world_size > 1 and not _reduces_over_ranks(metric):
        raise ConfigError(key, path, f"a torchmetrics Metric or a function metric under {dist.world_size} "
                                     f"processes: only those are reduced over every rank's samples")
    if callable(getattr(metric, "to", None)):
        metric = metric.to(device)
    higher = spec.declared_higher_is_better
    if higher is None:  # an object may say it once built
        declared = getattr(metric, "higher_is_better", None)
        higher = declared if isinstance(declared, bool) else None
    return ObjectMetric(spec.name, metric, spec.inputs or logits_and_targets(flatten), MODE_OF[higher], key, path)


def _reduces_over_ranks(metric: Any) -> bool:
    try:
        from torchmetrics import Metric
    except ImportError:  # pragma: no cover - a core dependency
        return False
    return isinstance(metric, Metric)


class EvalMetrics:
    """Every metric of a pass, by name; `check` runs them once on the first batch at build."""

    def __init__(self, metrics: list[Measured]) -> None:
        self.metrics = metrics

    def __bool__(self) -> bool:
        return bool(self.metrics)

    @property
    def modes(self) -> dict[str, str | None]:
        return {m.name: m.mode for m in self.metrics}

    def reset(self) -> None:
        for metric in self.metrics:
            metric.reset()

    def update(self, output: Any, batch: Any, samples: torch.Tensor) -> None:
        for metric in self.metrics:
            metric.update(output, batch, samples)

    def compute(self) -> dict[str, float]:
        return {metric.name: metric.compute() for metric in self.metrics}

    def check(self, output: Any, batch: Any, samples: torch.Tensor) -> None:
        """One update and compute on the untrained model's first batch, then a reset: a metric that
        cannot take what it is fed fails before training, naming it."""
        for metric in self.metrics:
            try:
                metric.update(output, batch, samples)
                metric.compute()
            except ConfigError:
                raise
            except Exception as err:  # noqa: BLE001 - the user's metric or pick
                raise ConfigError(metric.key, metric.path, f"a metric that runs on the output "
                                  f"{describe_batch(output)} and the batch {describe_batch(batch)}: it raised "
                                  f"{one_line(err)}").in_user_code(err) from None
            finally:
                metric.reset()
