"""The `data` config group: one builder per option returns train/val (and maybe test) datasets and what the
model must know; every option is read through the same DataLoader settings (conf/train.yaml, `data.num_workers`, ...)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch.utils.data import Dataset

from harness.data.base import ArrayDataset, DataMeta, Splits
from harness.data.chars import build_stdlib, build_text, validate_stdlib, validate_text
from harness.data.checks import check_samples
from harness.data.custom import build_custom, validate_custom
from harness.data.digits import build_digits, validate_digits
from harness.data.hf import build_hf, validate_hf
from harness.data.loader import BatchRecipe, LoaderSettings, LoadingConfig
from harness.data.prior import prior_loss
from harness.data.synthetic import build_synthetic, validate_synthetic
from harness.data.targets import AUTO, regression_loss
from harness.data.tokens import build_tokens, validate_tokens
from harness.core.errors import ConfigError
from harness.core.typed_config import read_typed
from harness.core.validation import is_whole

# option name -> (validate, build); validate reads no more than file metadata and returns the
# option's typed config, which is what build takes.
BUILDERS = {
    "stdlib": (validate_stdlib, build_stdlib),
    "text": (validate_text, build_text),
    "tokens": (validate_tokens, build_tokens),
    "synthetic": (validate_synthetic, build_synthetic),
    "custom": (validate_custom, build_custom),
    "hf": (validate_hf, build_hf),
    "digits": (validate_digits, build_digits),
}
COLUMN_KEYS = ("hf",)  # options whose data.input_key / data.target_key are column names, not batch fields
# options that hold out data.test_fraction themselves; custom, hf and tokens name their test split
HELD_OUT_TEST = ("stdlib", "text", "synthetic", "digits")

__all__ = ["ArrayDataset", "BatchRecipe", "DataConfig", "DataMeta", "LoaderSettings", "LoadingConfig", "Splits",
           "build_data", "build_splits", "check_test_split", "validate_data_config"]


@dataclass(frozen=True)
class DataConfig:
    """The `data` group, checked: its option, the keys every option shares, how samples become
    batches, and the option's own keys as its builder takes them."""

    name: str
    loading: LoadingConfig
    recipe: BatchRecipe
    option: Any  # what the option's validate returned and its builder takes


def _validate_loader(cfg: DictConfig) -> tuple[LoadingConfig, BatchRecipe]:
    loading = read_typed(cfg, LoadingConfig, "data")
    for key in ("input_key", "target_key"):
        value = cfg.get(key)
        names = list(value) if OmegaConf.is_list(value) and key == "input_key" else [value]
        if value is not None and not (names and all(isinstance(n, str) and n for n in names)):
            raise ConfigError(f"data.{key}", value, "null or the name of a field of dict samples"
                                                    + (" (or a list of names)" if key == "input_key" else ""))
    return loading, BatchRecipe.from_config(cfg)  # imports data.collate_fn


def validate_data_config(cfg: DictConfig) -> DataConfig:
    """Fail fast on data settings that cannot work (before any file is read in full)."""
    name = cfg.get("name")
    if name not in BUILDERS:
        raise ConfigError("data.name", name, f"one of {sorted(BUILDERS)}")
    if "block_size" in cfg and (not is_whole(cfg.block_size)
                                or cfg.block_size < 1):
        raise ConfigError("data.block_size", cfg.block_size, "an integer >= 1")
    if "val_fraction" in cfg and not (isinstance(cfg.val_fraction, (int, float)) and 0.0 < cfg.val_fraction < 1.0):
        raise ConfigError("data.val_fraction", cfg.val_fraction, "a number in (0, 1)")
    _validate_test_fraction(cfg)
    if name != "custom" and cfg.get("_target_") is not None:
        raise ConfigError("data._target_", cfg._target_, "set with data=custom (data=custom data._target_=mypkg.build)")
    loading, recipe = _validate_loader(cfg)
    if name in COLUMN_KEYS:  # its input_key/target_key name the dataset's columns, which it reads itself
        recipe = replace(recipe, input_key=None, target_key=None)
    validate, _ = BUILDERS[name]
    return DataConfig(name, loading, recipe, validate(cfg))


def _validate_test_fraction(cfg: DictConfig) -> None:
    """Range only; whether the split leaves enough samples is known once the data is (holdout.test_size)."""
    fraction = cfg.get("test_fraction")
    if fraction is None or cfg.get("name") not in HELD_OUT_TEST:
        return
    room = 1.0 - float(cfg.get("val_fraction", 0.0))
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction < room:
        raise ConfigError("data.test_fraction", fraction, f"0 (no test split) or a fraction in (0, {room:g}): the "
                                                          f"test split is held out of what validation leaves")


def build_splits(data: DataConfig, ignore_index: int | None = None, loss_function: str = AUTO,
                 user_loss: str | None = None) -> Splits:
    """Build the configured data option's splits; a sample of train and val is checked against the
    declared sizes before any training starts (the test split's, by `check_test_split`, only when
    it is scored). Targets equal to `ignore_index` (loss.ignore_index) are left out of the checks
    and the priors, which are those of `loss_function` (loss.function) for real-valued targets.
    With a `user_loss` (loss._target_'s path, or "model"), batches go whole to it: there is no
    target to check and no prior to know."""
    _, build = BUILDERS[data.name]
    splits = build(data.option)
    if user_loss is not None:
        for split, dataset in (("train", splits.train), ("val", splits.val)):
            if len(dataset) == 0:
                raise ConfigError("data", split, "a non-empty split: it has no samples")
        return replace(splits, meta=replace(splits.meta, optimum_loss=None, user_loss=user_loss))
    task = splits.meta.task
    function = regression_loss(loss_function, task)
    meta = replace(splits.meta, ignore_index=None if task == "regression" else ignore_index, loss_function=function,
                   optimum_loss=splits.meta.optimum_loss if function in (None, "mse") else None)
    check_samples({"train": splits.train, "val": splits.val}, meta, data.recipe)
    return replace(splits, meta=replace(meta, prior_loss=prior_loss(splits.train, meta)))


def build_data(data: DataConfig, ignore_index: int | None = None,
               loss_function: str = AUTO) -> tuple[Dataset, Dataset, DataMeta]:
    """(train, val, meta): what training reads."""
    splits = build_splits(data, ignore_index, loss_function)
    return splits.train, splits.val, splits.meta


def check_test_split(data: DataConfig, test: Dataset, meta: DataMeta) -> None:
    """The test split's labels or ids against the declared sizes, as train's and val's were."""
    if meta.user_loss is None:
        check_samples({"test": test}, meta, data.recipe)
