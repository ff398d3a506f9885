"""How a whole batch reaches a model's forward when the run trains on the user's objective
(`loss._target_`, `loss.function=model`), by the batch's structure:

- a mapping calls `model(**batch)` with the keys `forward` accepts (all of them when it takes
  `**kwargs`); `data.input_key` narrows that: one name is passed positionally, a list by keyword;
- a tuple or list `(inputs..., target)` calls `model(*inputs)`, its items but the last, as an
  (input, target) pair always did, unless `forward` requires more positional arguments than
  that: a contrastive pair `(view_a, view_b)` reaches `forward(a, b)` whole;
- a tensor calls `model(batch)`.
"""
from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn

from harness.core.callables import parameters


def required_positional(forward: Any) -> int:
    """Positional parameters `forward` requires (those without a default)."""
    try:
        params = inspect.signature(forward).parameters.values()
    except (TypeError, ValueError):
        return 1
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty for p in params)


class ModelCall:
    """Built once from the unwrapped model (a DDP or compiled wrapper hides the signature)."""

    def __init__(self, model: nn.Module, input_key: str | list[str] | None = None) -> None:
        self.names, self.var_kw = parameters(model.forward)
        self.required = required_positional(model.forward)
        self.input_key = input_key

    def arguments(self, batch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """(args, kwargs) of the forward call for `batch`."""
        if isinstance(batch, Mapping):
            if isinstance(self.input_key, str):
                return (batch[self.input_key],), {}
            keys = self.input_key if isinstance(self.input_key, list) else \
                [k for k in batch if self.var_kw or k in self.names]
            return (), {k: batch[k] for k in keys}
        if isinstance(batch, (tuple, list)):
            inputs = max(len(batch) - 1, min(self.required, len(batch)), 1)
            return tuple(batch[:inputs]), {}
        return (batch,), {}

    def unused(self, batch: Any) -> list[str]:
        """A mapping batch's keys the forward is not given (the objective still reads them)."""
        if not isinstance(batch, Mapping):
            return []
        args, kwargs = self.arguments(batch)
        given = set(kwargs) | ({self.input_key} if isinstance(self.input_key, str) else set())
        return [str(k) for k in batch if k not in given]

    def __call__(self, model: nn.Module, batch: Any) -> Any:
        args, kwargs = self.arguments(batch)
        return model(*args, **kwargs)
