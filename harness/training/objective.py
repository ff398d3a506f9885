"""What a run minimises, read the same way by the training step, the evaluator, the doctor and the
LR finder:

- the built-in loss (`TargetLoss`): cross-entropy or a distance on `(input, target)` pairs;
- your objective (`loss._target_=mypkg.objective`): `objective(output, batch, **settings)` gets
  whatever the model returned and the whole micro-batch, and returns a scalar tensor or a mapping
  with a scalar `loss` and other named scalar parts (logged as `loss/<part>`); a `count` entry
  makes `loss` (and the parts) sums over what it counted, so an accumulated update is exactly
  the big batch's mean;
- the loss the model computes itself (`loss.function=model`): `output.loss` or `output["loss"]`,
  with the output's other scalar tensors named `*loss` as parts (an MoE router's `aux_loss`).

Without a count, an update's loss is the mean of its micro-batches' losses (each micro-batch
weighs the same), which is the big batch's mean when micro-batches hold as many items.
"""
from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from harness.core.callables import locate
from harness.core.errors import ConfigError, one_line
from harness.data.batch import describe_batch
from harness.data.targets import AUTO, target_counts, target_shares
from harness.models.calling import ModelCall
from harness.models.forward_facts import untouched
from harness.models.output import OutputPicker

log = logging.getLogger("harness")
MODEL_LOSS = "model"  # loss.function=model: the loss the model returns
LOSS, COUNT = "loss", "count"  # the keys of an objective's mapping the harness reads itself
FINAL_PART = "final_val_loss_"  # summary.json's field for each part at the last eval (a sweep may optimise it)
PRIOR_PART = "prior"  # a part holding the loss of the best constant prediction, when the objective knows it
TARGET_KEY = "_target_"
COUNT_RATIO = 4  # counts must differ this much for a mean and a sum to be told apart (PART_SHARE: ~8x)
PART_SHARE = 8  # the smaller batch of that check: this share of the first micro-batch
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # the built-in loss on (output, target)


@dataclass(frozen=True)
class Scored:
    """One micro-batch's loss (a mean; a sum over `count` items when the objective counts) and its
    named parts, on the device."""

    loss: torch.Tensor
    parts: dict[str, torch.Tensor] = field(default_factory=dict)  # as the objective returned them (attached)
    count: torch.Tensor | None = None


class Objective(Protocol):
    open: bool  # True: reads whole batches (the user's objective or the model's loss)

    def shares(self, targets: list[Any]) -> list[float] | None: ...

    def counted_targets(self, targets: list[Any]) -> int | None:
        """How many targets this rank's update counts where ranks may count different numbers; None
        where every rank's update weighs the same."""
        ...

    def score(self, model: nn.Module, x: Any, y: Any) -> Scored: ...


class TargetLoss:
    """The built-in loss on (input, target) pairs: micro-batches weigh by their counted targets."""

    open = False

    def __init__(self, loss_fn: LossFn, pick_output: OutputPicker,
                 ignore_index: int | None) -> None:
        self.loss_fn, self.pick_output, self.ignore_index = loss_fn, pick_output, ignore_index

    def shares(self, targets: list[torch.Tensor]) -> list[float] | None:
        return target_shares(targets, self.ignore_index)

    def counted_targets(self, targets: list[torch.Tensor]) -> int | None:
        return None if self.ignore_index is None else sum(target_counts(targets, self.ignore_index))

    def score(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Scored:
        return Scored(self.loss_fn(self.pick_output(model(x)), y))


@dataclass(frozen=True)
class ObjectiveSpec:
    """`loss._target_` (the function and the keyword settings it gets) or `loss.function=model`."""

    path: str  # the dotted path, or "model"
    function: Callable[..., Any] | None = None  # None: the model's own loss
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return "loss.function" if self.function is None else "loss._target_"

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[-1]


def objective_spec(cfg: DictConfig, harness_keys: tuple[str, ...]) -> ObjectiveSpec | None:
    """The open objective the `loss` node names, checked without running it; None: a built-in loss.
    `harness_keys`: the node's keys the harness reads (every other key is the function's)."""
    target, function = cfg.get(TARGET_KEY), cfg.get("function")
    if target is None and function != MODEL_LOSS:
        return None
    chosen = "loss._target_" if target is not None else "loss.function=model"
    for key in ("label_smoothing", "z_loss"):
        if cfg.get(key):
            raise ConfigError(f"loss.{key}", cfg.get(key), f"0 with {chosen} (a setting of the built-in "
                                                           f"cross-entropy; this objective computes its own loss)")
    if target is None:
        return ObjectiveSpec(MODEL_LOSS)
    if function != AUTO:
        raise ConfigError("loss.function", function, "auto with loss._target_ (your objective is the loss), or "
                                                     "loss._target_=null")
    fn = locate("loss._target_", target)
    if not callable(fn) or inspect.isclass(fn):
        raise ConfigError("loss._target_", target, "a function objective(output, batch) that returns the loss")
    kwargs = {k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items()
              if k not in harness_keys and k != TARGET_KEY}
    try:
        inspect.signature(fn).bind(None, None, **kwargs)
    except TypeError as err:
        raise ConfigError("loss._target_", target, f"a function that takes (output, batch"
                                                   f"{''.join(', ' + k + '=...' for k in kwargs)}): "
                                                   f"{fn.__name__}{_signature(fn)} does not ({err})") from None
    except ValueError:  # a builtin without a signature: trust it
        pass
    return ObjectiveSpec(str(target), fn, kwargs)


def _signature(fn: Callable[..., Any]) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(...)"


class OpenObjective:
    """The user's objective, or the model's own loss, on whole batches."""

    open = True

    def __init__(self, spec: ObjectiveSpec, call: ModelCall) -> None:
        self.spec, self.call = spec, call
        self.part_names: tuple[str, ...] = ()  # what `check` saw the objective return besides its loss
        self.counted: tuple[float, dict[str, float]] | None = None  # `check`'s count and parts, where it saw both

    def shares(self, targets: list[Any]) -> list[float]:
        return [1.0 / len(targets)] * len(targets)

    def counted_targets(self, targets: list[Any]) -> None:
        return None  # a count the objective returns weighs itself (TrainStep._per_counted_item)

    def score(self, model: nn.Module, x: Any, y: Any = None) -> Scored:
        return self.scored_output(model, x)[1]

    def scored_output(self, model: nn.Module, batch: Any) -> tuple[Any, Scored]:
        """The model's output and its score (evaluation measures the output too)."""
        output = self.call(model, batch)
        return output, self.read(self.returned(output, batch))

    def returned(self, output: Any, batch: Any) -> Any:
        """What the objective returned for this output and batch (the model's loss: its output)."""
        if self.spec.function is None:
            return output
        return self.spec.function(output, batch, **self.spec.kwargs)

    def read(self, result: Any) -> Scored:
        """Scored from what `returned` gave, without checks (`check` made them on the first batch)."""
        if self.spec.function is None:
            return _model_loss(result)
        if isinstance(result, torch.Tensor):
            return Scored(result)
        parts = {str(k): _scalar(v) for k, v in result.items() if k not in (LOSS, COUNT)}
        count = result.get(COUNT)
        return Scored(result[LOSS], parts, _scalar(count) if count is not None else None)

    def check(self, model: nn.Module, batch: Any) -> Any:
        """One forward and objective on the first batch, before training, in eval mode and with the
        RNG streams left as they were: every way the objective cannot train fails in one line
        naming it, what it returned and what is allowed. Returns the model's output."""
        with untouched(model):  # no batch-norm statistics updated, no dropout draws
            return self._check(model, batch)

    def _check(self, model: nn.Module, batch: Any) -> Any:
        spec, name = self.spec, self.spec.name
        try:
            output = self.call(model, batch)
        except Exception as err:  # noqa: BLE001 - the user's forward
            args, kwargs = self.call.arguments(batch)
            given = ", ".join([*(describe_batch(a) for a in args), *(f"{k}=..." for k in kwargs)])
            raise ConfigError("model._target_", type(model).__name__,
                              f"a model whose forward takes the batch {describe_batch(batch)} as "
                              f"forward({given}): it raised {one_line(err)}").in_user_code(err) from None
        if spec.function is None:
            if _field(output, LOSS) is None:
                raise ConfigError("loss.function", MODEL_LOSS, f"a model whose output holds a `loss` (output.loss or "
                                                               f"output['loss']); {type(model).__name__} returned "
                                  f"{describe_batch(output)} (an HF model computes it when the batch has `labels`)")
            result = output
        else:
            try:
                result = spec.function(output, batch, **spec.kwargs)
            except Exception as err:  # noqa: BLE001 - the user's objective
                raise ConfigError("loss._target_", spec.path, f"an objective that runs on the model's output "
                                  f"{describe_batch(output)} and the batch {describe_batch(batch)}: {name} raised "
                                  f"{one_line(err)}").in_user_code(err) from None
            _check_returned(result, spec)
        scored = self.read(result)
        _check_gradient_path(scored.loss, model, spec)
        self.part_names = tuple(scored.parts)
        if scored.count is not None and scored.parts:
            self.counted = float(scored.count), {name: float(value.detach()) for name, value in scored.parts.items()}
        return output

    def check_counted_parts(self, model: nn.Module, fewer: Any) -> None:
        """Beside a `count`, parts are sums over the counted items, as `loss` is, and are divided by
        it; a part returned as a mean would be divided again and logged `count` times too small. On
        two batches whose counts differ (the checked first batch, and `fewer` of its samples), a mean
        stays put while a sum grows with its count: a part that reads as a mean is refused in one
        line naming it."""
        with torch.no_grad(), untouched(model):
            small = self.read(self.returned(self.call(model, fewer), fewer))
        big_count, big_parts = self.counted
        counts = big_count, float(small.count)
        if not counts[1] > 0 or counts[0] < COUNT_RATIO * counts[1]:
            return
        for name, big in big_parts.items():
            values = big, float(small.parts[name])
            if values[0] * values[1] <= 0:
                continue  # a zero or a sign change: the two readings cannot be told apart
            as_mean = abs(math.log(values[0] / values[1]))
            as_sum = abs(math.log(values[0] / counts[0] * counts[1] / values[1]))
            if as_sum - as_mean > math.log(COUNT_RATIO):  # the mean's reading fits the two batches far better
                raise ConfigError(self.spec.key, self.spec.path, f"parts beside `count` that are sums over the "
                                  f"counted items, as `loss` is (each is divided by `count`): {name} reads as a "
                                  f"mean ({values[0]:.4g} over {counts[0]:.0f} counted items, {values[1]:.4g} over "
                                  f"{counts[1]:.0f}); return its sum, or measure it with metrics.{name} "
                                  f"(docs/metrics.md)")


def _field(output: Any, name: str) -> Any:
    if isinstance(output, Mapping):
        return output.get(name)
    return getattr(output, name, None)


def _model_loss(output: Any) -> Scored:
    loss = _field(output, LOSS)
    items = output.items() if isinstance(output, Mapping) else vars(output).items()
    parts = {str(k): v for k, v in items
             if k != LOSS and str(k).endswith(LOSS) and isinstance(v, torch.Tensor) and v.dim() == 0}
    return Scored(loss, parts)


def _scalar(value: Any) -> torch.Tensor:
    """A part as a tensor; still attached to the graph (the gradient shares read it), detached when summed."""
    return value if isinstance(value, torch.Tensor) else torch.tensor(float(value))


def _is_scalar(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.numel() == 1 and value.dim() <= 1


def _check_returned(result: Any, spec: ObjectiveSpec) -> None:
    allowed = "a scalar tensor, or a mapping with a scalar `loss` (and other named scalar parts, maybe a `count`)"
    where = f"{spec.name} returned"
    if isinstance(result, torch.Tensor):
        if result.dim() != 0:
            raise ConfigError("loss._target_", spec.path, f"{allowed}: {where} a tensor of shape {list(result.shape)} "
                                                          f"(reduce it, e.g. .mean())")
        return
    if not isinstance(result, Mapping):
        raise ConfigError("loss._target_", spec.path, f"{allowed}: {where} a {type(result).__name__}")
    if LOSS not in result:
        raise ConfigError("loss._target_", spec.path, f"{allowed}: {where} a mapping without `loss` "
                                                      f"(keys {sorted(map(str, result))})")
    if not isinstance(result[LOSS], torch.Tensor) or result[LOSS].dim() != 0:
        raise ConfigError("loss._target_", spec.path, f"{allowed}: {where} loss={describe_batch(result[LOSS])}")
    for key, value in result.items():
        if key != LOSS and not (_is_scalar(value) or isinstance(value, (int, float)) and not isinstance(value, bool)):
            raise ConfigError("loss._target_", spec.path, f"{allowed}: {where} {key}={describe_batch(value)}, "
                                                          f"not a scalar")


def _check_gradient_path(loss: torch.Tensor, model: nn.Module, spec: ObjectiveSpec) -> None:
    """The loss must reach some trainable parameter, or training would move nothing."""
    params = [p for p in model.parameters() if p.requires_grad]
    what = f"{spec.name}'s loss" if spec.function is not None else "the model's output.loss"
    if not loss.is_floating_point():
        raise ConfigError(spec.key, spec.path, f"a floating-point loss: {what} is {describe_batch(loss)}")
    if not loss.requires_grad or not params:
        raise ConfigError(spec.key, spec.path, f"a loss with a gradient path to the model's parameters: {what} "
                                               f"has none (computed under no_grad, detached, or from .item()?)")
    grads = torch.autograd.grad(loss, params, allow_unused=True, retain_graph=False)
    if all(g is None for g in grads):
        raise ConfigError(spec.key, spec.path, f"a loss with a gradient path to the model's parameters: {what} "
                                               f"reaches none of them")


def note_unused_fields(batch: Any, call: ModelCall, spec: ObjectiveSpec) -> None:
    """A mapping batch's fields the model's forward is not given: said once, since only the
    objective reads them (a misspelt forward argument shows up here)."""
    unused = call.unused(batch)
    if unused:
        reader = "nothing reads them" if spec.function is None else f"only {spec.name} reads them"
        log.info("the model's forward does not take the batch's %s, so it is not given them (%s)",
                 ", ".join(unused), reader)
