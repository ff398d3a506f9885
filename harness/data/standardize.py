"""`data.standardize=true`: every input element scaled by the training split's own mean and std;
`data.standardize_targets=true`: every regression target element too.

Raw columns in the thousands, or pixels in 0-255, make a network's first pre-activations huge:
the first updates blow up, sigmoids saturate, ReLUs die. The textbook fix (scikit-learn's
StandardScaler) is to centre and scale each input feature with the training split's statistics,
and to apply the same statistics to validation and test data. Here they come from up to
FIT_SAMPLES training samples spread over the split, read once when the run is built (the same
samples on every start, so a resumed run scales exactly as before), and are applied to every
batch of every split after collation. Each element of an input is its own feature (per pixel for
images), and an element that never varies is only centred.

Regression targets in the thousands (or 1e8: x^4 on [-100, 100]) ask a freshly initialised output
layer, whose values are near +-1, for outputs thousands of times larger: Adam's steps of ~lr per
weight take tens of thousands of updates to get there, and SGD's gradients, as large as the
targets, blow up. The fix is the same scaler on the targets. Here the model learns the targets in
standard units while every loss the run reports (train, val, test, the objective a sweep reads)
stays in the targets' own units: the harness maps the model's output back (output x std + mean)
before any loss reads it, and only the gradient follows the standardised loss.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset

from harness.data.checks import spread_indices
from harness.data.loader import BatchRecipe, InputScale, fetch
from harness.core.errors import ConfigError

FIT_SAMPLES = 4096
FIT_SEED = 3  # a sample of its own: not the one input_stats or the batch checks read
CONSTANT = 1e-8  # a std below this: the element does not vary, and is only centred


SCALED_LOSSES = ("mse", "l1", "huber")  # bce reads targets in [0, 1]: they are probabilities, not scaled
SUMMARY_ELEMENTS = 16  # summary.json lists the target statistics of up to this many target elements


@dataclass(frozen=True)
class TargetScale(InputScale):
    """Per-element statistics of the regression targets (`data.standardize_targets`): called, it
    puts targets (or predictions) in standard units; `prediction` maps a model output back."""

    def prediction(self, output: torch.Tensor) -> torch.Tensor:
        """A model output in standard units, in the targets' own."""
        return output * self.std + self.mean

    def to(self, device: torch.device) -> TargetScale:
        return TargetScale(self.mean.to(device), self.std.to(device))

    def summary(self) -> dict[str, Any]:
        """What summary.json records: the statistics a prediction is made with, for up to
        SUMMARY_ELEMENTS target elements, else their ranges."""
        mean, std = self.mean.flatten().tolist(), self.std.flatten().tolist()
        if len(mean) <= SUMMARY_ELEMENTS:
            return {"elements": len(mean), "mean": mean, "std": std}
        return {"elements": len(mean), "mean_range": [min(mean), max(mean)], "std_range": [min(std), max(std)]}


def _element_stats(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-element mean and std over the samples (dim 0), in float64; an element that never
    varies gets std 1, so it is only centred."""
    values = values.double()
    mean = values.mean(dim=0)
    std = values.std(dim=0) if len(values) > 1 else torch.ones_like(mean)
    return mean, torch.where(std > CONSTANT, std, torch.ones_like(std))


def _input_scale(x: torch.Tensor) -> InputScale:
    """The per-element mean and std of the fitting sample's inputs, as `BatchRecipe.pair` applies them."""
    if not x.is_floating_point():
        raise ConfigError("data.standardize", True, f"false for {x.dtype} inputs (token ids and other integers "
                                                    f"are not scaled; an embedding learns their scale)")
    mean, std = _element_stats(x)
    return InputScale(mean.to(x.dtype), std.to(x.dtype))


def _check_targets(task: str, loss_function: str | None) -> None:
    """Only real-valued targets under a distance loss are scaled (refused before anything is read)."""
    if task != "regression" or loss_function not in SCALED_LOSSES:
        what = f"data.task={task}" if task != "regression" else f"loss.function={loss_function}"
        raise ConfigError("data.standardize_targets", True, f"false for {what}: only real-valued targets under "
                                                            f"{', '.join(SCALED_LOSSES)} are scaled (class ids, "
                                                            f"tokens and bce's probabilities are not)")


def standardised(recipe: BatchRecipe, train: Dataset, inputs: bool = False, targets: bool = False, task: str = "",
                 loss_function: str | None = None) -> tuple[BatchRecipe, TargetScale | None]:
    """`recipe`, standardising its inputs when `data.standardize` asks for it, and the regression
    targets' statistics (float32) when `data.standardize_targets` does: both fitted on one read of
    the same training samples."""
    if targets:
        _check_targets(task, loss_function)
    if not (inputs or targets):
        return recipe, None
    x, y = fetch(train, recipe, spread_indices(len(train), FIT_SAMPLES, seed=FIT_SEED))
    scaled = dataclasses.replace(recipe, scale=_input_scale(x)) if inputs else recipe
    if not targets:
        return scaled, None
    mean, std = _element_stats(y)
    return scaled, TargetScale(mean.float(), std.float())
