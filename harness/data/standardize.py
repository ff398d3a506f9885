"""`data.standardize=true`: every input element scaled by the training split's own mean and std.

Raw columns in the thousands, or pixels in 0-255, make a network's first pre-activations huge:
the first updates blow up, sigmoids saturate, ReLUs die. The textbook fix (scikit-learn's
StandardScaler) is to centre and scale each input feature with the training split's statistics,
and to apply the same statistics to validation and test data. Here they come from up to
FIT_SAMPLES training samples spread over the split, read once when the run is built (the same
samples on every start, so a resumed run scales exactly as before), and are applied to every
batch of every split after collation. Each element of an input is its own feature (per pixel for
images), and an element that never varies is only centred.
"""
from __future__ import annotations

import dataclasses

import torch
from torch.utils.data import Dataset

from harness.data.checks import spread_indices
from harness.data.loader import BatchRecipe, InputScale, fetch
from harness.core.errors import ConfigError

FIT_SAMPLES = 4096
FIT_SEED = 3  # a sample of its own: not the one input_stats or the batch checks read
CONSTANT = 1e-8  # a std below this: the element does not vary, and is only centred


def fit_input_scale(train: Dataset, recipe: BatchRecipe) -> InputScale:
    """The training split's per-element mean and std of the inputs, as `BatchRecipe.pair` applies them."""
    x, _ = fetch(train, recipe, spread_indices(len(train), FIT_SAMPLES, seed=FIT_SEED))
    if not x.is_floating_point():
        raise ConfigError("data.standardize", True, f"false for {x.dtype} inputs (token ids and other integers "
                                                    f"are not scaled; an embedding learns their scale)")
    values = x.double()
    mean = values.mean(dim=0)
    std = values.std(dim=0) if len(values) > 1 else torch.ones_like(mean)
    std = torch.where(std > CONSTANT, std, torch.ones_like(std))
    return InputScale(mean.to(x.dtype), std.to(x.dtype))


def with_input_scale(recipe: BatchRecipe, train: Dataset, standardize: bool) -> BatchRecipe:
    """`recipe` that standardises its inputs when `data.standardize` asks for it."""
    if not standardize:
        return recipe
    return dataclasses.replace(recipe, scale=fit_input_scale(train, recipe))
