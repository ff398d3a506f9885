"""The `data` config group: one builder per option returns train/val (and maybe test) datasets and what the
model must know; every option is read through the same DataLoader settings (conf/train.yaml, `data.num_workers`, ...)."""
from __future__ import annotations

from dataclasses import replace

from omegaconf import DictConfig, OmegaConf
from torch.utils.data import Dataset

from harness.data.base import ArrayDataset, DataMeta, Splits
from harness.data.chars import build_stdlib, build_text, validate_stdlib, validate_text
from harness.data.checks import check_samples
from harness.data.custom import build_custom, validate_custom
from harness.data.digits import build_digits, validate_digits
from harness.data.hf import build_hf, validate_hf
from harness.data.loader import WORKER_STARTS, BatchRecipe, LoaderSettings
from harness.data.prior import prior_loss
from harness.data.synthetic import build_synthetic, validate_synthetic
from harness.data.targets import AUTO, regression_loss
from harness.data.tokens import build_tokens, validate_tokens
from harness.core.errors import ConfigError
from harness.core.validation import is_whole

# option name -> (validate, build); validate reads no more than file metadata.
BUILDERS = {
    "stdlib": (validate_stdlib, build_stdlib),
    "text": (validate_text, build_text),
    "tokens": (validate_tokens, build_tokens),
    "synthetic": (validate_synthetic, build_synthetic),
    "custom": (validate_custom, build_custom),
    "hf": (validate_hf, build_hf),
    "digits": (validate_digits, build_digits),
}
PIN_MEMORY = ("auto", True, False)

# options that hold out data.test_fraction themselves; custom, hf and tokens name their test split
HELD_OUT_TEST = ("stdlib", "text", "synthetic", "digits")

__all__ = ["ArrayDataset", "BatchRecipe", "DataMeta", "LoaderSettings", "Splits", "build_data", "build_splits",
           "check_test_split", "loader_settings", "validate_data_config"]


def _validate_loader(cfg: DictConfig) -> None:
    workers = cfg.get("num_workers", 0)
    if not is_whole(workers) or workers < 0:
        raise ConfigError("data.num_workers", workers, "an integer >= 0 (0 reads batches in the training process)")
    if cfg.get("pin_memory", "auto") not in PIN_MEMORY:
        raise ConfigError("data.pin_memory", cfg.get("pin_memory"), "auto (on for CUDA), true or false")
    if not isinstance(cfg.get("shuffle", True), bool):
        raise ConfigError("data.shuffle", cfg.get("shuffle"), "true (a new sample order every epoch) or false")
    if not isinstance(cfg.get("persistent_workers", True), bool):
        raise ConfigError("data.persistent_workers", cfg.get("persistent_workers"), "true or false")
    if not isinstance(cfg.get("standardize", False), bool):
        raise ConfigError("data.standardize", cfg.get("standardize"),
                          "true (each input feature scaled by the training split's mean and std) or false")
    if not isinstance(cfg.get("standardize_targets", False), bool):
        raise ConfigError("data.standardize_targets", cfg.get("standardize_targets"),
                          "true (each regression target scaled by the training split's mean and std) or false")
    prefetch = cfg.get("prefetch_factor")
    if prefetch is not None and (not is_whole(prefetch) or prefetch < 1):
        raise ConfigError("data.prefetch_factor", prefetch, "null (torch's default, 2) or an integer >= 1")
    if cfg.get("worker_start", "auto") not in WORKER_STARTS:
        raise ConfigError("data.worker_start", cfg.get("worker_start"),
                          "auto (fork, or a forkserver when other threads run), fork, forkserver or spawn")
    for key in ("input_key", "target_key"):
        value = cfg.get(key)
        names = list(value) if OmegaConf.is_list(value) and key == "input_key" else [value]
        if value is not None and not (names and all(isinstance(n, str) and n for n in names)):
            raise ConfigError(f"data.{key}", value, "null or the name of a field of dict samples"
                                                    + (" (or a list of names)" if key == "input_key" else ""))
    BatchRecipe.from_config(cfg)  # imports data.collate_fn


def validate_data_config(cfg: DictConfig) -> None:
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
    _validate_loader(cfg)
    validate, _ = BUILDERS[name]
    validate(cfg)


def _validate_test_fraction(cfg: DictConfig) -> None:
    """Range only; whether the split leaves enough samples is known once the data is (holdout.test_size)."""
    fraction = cfg.get("test_fraction")
    if fraction is None or cfg.get("name") not in HELD_OUT_TEST:
        return
    room = 1.0 - float(cfg.get("val_fraction", 0.0))
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction < room:
        raise ConfigError("data.test_fraction", fraction, f"0 (no test split) or a fraction in (0, {room:g}): the "
                                                          f"test split is held out of what validation leaves")


def loader_settings(cfg: DictConfig, device_type: str) -> LoaderSettings:
    pin = cfg.get("pin_memory", "auto")
    return LoaderSettings(num_workers=int(cfg.get("num_workers", 0)),
                          pin_memory=device_type == "cuda" if pin == "auto" else bool(pin),
                          persistent_workers=bool(cfg.get("persistent_workers", True)),
                          prefetch_factor=cfg.get("prefetch_factor"),
                          worker_start=str(cfg.get("worker_start", "auto")))


def build_splits(cfg: DictConfig, ignore_index: int | None = None, loss_function: str = AUTO) -> Splits:
    """Build the configured data option's splits; a sample of train and val is checked against the
    declared sizes before any training starts (the test split's, by `check_test_split`, only when
    it is scored). Targets equal to `ignore_index` (loss.ignore_index) are left out of the checks
    and the priors, which are those of `loss_function` (loss.function) for real-valued targets."""
    validate_data_config(cfg)
    _, build = BUILDERS[cfg.name]
    splits = build(cfg)
    task = splits.meta.task
    function = regression_loss(loss_function, task)
    meta = replace(splits.meta, ignore_index=None if task == "regression" else ignore_index, loss_function=function,
                   optimum_loss=splits.meta.optimum_loss if function in (None, "mse") else None)
    check_samples({"train": splits.train, "val": splits.val}, meta, BatchRecipe.from_config(cfg))
    return replace(splits, meta=replace(meta, prior_loss=prior_loss(splits.train, meta)))


def build_data(cfg: DictConfig, ignore_index: int | None = None,
               loss_function: str = AUTO) -> tuple[Dataset, Dataset, DataMeta]:
    """(train, val, meta): what training reads."""
    splits = build_splits(cfg, ignore_index, loss_function)
    return splits.train, splits.val, splits.meta


def check_test_split(cfg: DictConfig, test: Dataset, meta: DataMeta) -> None:
    """The test split's labels or ids against the declared sizes, as train's and val's were."""
    check_samples({"test": test}, meta, BatchRecipe.from_config(cfg))
