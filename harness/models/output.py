"""What the loss reads from a model's output: a tensor, a tuple's first element, a dict's or a
Hugging Face `ModelOutput`'s `logits` (the `model_output` key picks another field); with
`data.standardize_targets`, mapped back to the targets' own units."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from harness.data.standardize import TargetScale

AUTO = "auto"


class OutputPicker:
    """`model_output`: auto | a field name (dict, ModelOutput, attribute) | a position (tuple)."""

    def __init__(self, key: str | int = AUTO, target_scale: TargetScale | None = None) -> None:
        self.key, self.target_scale = key, target_scale

    def __call__(self, output: Any) -> torch.Tensor:
        picked = self.pick(output)
        return picked if self.target_scale is None else self.target_scale.prediction(picked)

    def pick(self, output: Any) -> torch.Tensor:
        """The field itself, as the model computed it."""
        if isinstance(output, torch.Tensor):  # the common case costs one isinstance
            return output
        key = self.key
        if isinstance(output, Mapping):  # ModelOutput is an OrderedDict too
            return self._from_mapping(output, key)
        if isinstance(output, (tuple, list)):
            position = 0 if key == AUTO else key
            if not isinstance(position, int) or not -len(output) <= position < len(output):
                raise ValueError(f"the model returned a {type(output).__name__} of {len(output)} items; "
                                 f"set model_output to a position in it")
            return output[position]
        name = "logits" if key == AUTO else str(key)
        if hasattr(output, name):
            return getattr(output, name)
        raise ValueError(f"the model returned a {type(output).__name__} without a {name!r} attribute")

    @staticmethod
    def _from_mapping(output: Mapping, key: str | int) -> torch.Tensor:
        if key != AUTO:
            if key not in output:
                raise ValueError(f"the model's output has no field {key!r}; its fields: {list(output)}")
            return output[key]
        if "logits" in output:
            return output["logits"]
        tensors = [k for k, v in output.items() if isinstance(v, torch.Tensor)]
        if len(tensors) == 1:
            return output[tensors[0]]
        raise ValueError(f"the model's output has no 'logits' field; set model_output to one of {list(output)}")
