"""The config is read once: validation returns the typed groups, and building a run reads none of
them again (a second reader is a second place for a default to live)."""
from __future__ import annotations

from collections import Counter

import pytest
import torch

from conftest import compose_cfg
from harness.assembly.assemble import assemble
from harness.config.doctor import DoctorConfig
from harness.config.lr_find import LRFindConfig
from harness.config.run_config import RunConfig, validate_config
from harness.core.errors import ConfigError
from harness.data import LoadingConfig
from harness.data.synthetic import SyntheticConfig
from harness.models import ModelSpec
from harness.models.init import InitConfig
from harness.training.optim import OptimSpec
from harness.loop.cadence import TrainerConfig
from harness.training.early_stop import EarlyStopConfig
from harness.training.faults import FaultConfig
from harness.training.perf import PerfConfig
from harness.training.guard import GuardConfig
from harness.training.loss import LossConfig
from harness.training.scale_lr import ScaleLRConfig
from harness.training.monitor import MonitorConfig
from harness.training.parallel import ParallelConfig
from harness.training.precision import PrecisionConfig
from harness.training.schedule import ScheduleConfig

TYPED = (TrainerConfig, PrecisionConfig, ScheduleConfig, ParallelConfig, LossConfig, GuardConfig, MonitorConfig,
         EarlyStopConfig, FaultConfig, PerfConfig, ScaleLRConfig, LoadingConfig, InitConfig,
         OptimSpec, ModelSpec, SyntheticConfig, LRFindConfig, DoctorConfig)
RUN = ["model=mlp", "data=synthetic", "model.width=16", "logger=none", "trainer.max_steps=4"]


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """How many times each typed group is constructed (read) from here on."""
    counted: Counter = Counter()
    for schema in TYPED:
        original = schema.__init__

        def counting(self, *args, _original=original, _name=schema.__name__, **kwargs):
            counted[_name] += 1
            _original(self, *args, **kwargs)

        monkeypatch.setattr(schema, "__init__", counting)
    return counted


def test_validation_reads_each_group_once_and_building_reads_none_again(reads, tmp_path):
    torch.set_num_threads(1)
    config = validate_config(compose_cfg([*RUN, "guard.spike_window=64", "monitor.every=2", "precision=fp16",
                                          "schedule=wsd", "clip=null", "batch_size=16", "accum=2",
                                          "data.shuffle=false", "data.n_train=256"]))
    assert isinstance(config, RunConfig)
    assert reads == Counter({schema.__name__: 1 for schema in TYPED})
    assert (config.guard.spike_window, config.monitor.every, config.precision.name,
            config.schedule.decay_fraction) == (64, 2, "fp16", 0.2)
    built = assemble(config, tmp_path / "run", torch.device("cpu"), None)
    try:
        assert reads == Counter({schema.__name__: 1 for schema in TYPED})
        assert built.precision.scaler.is_enabled() and built.train_step.guard.cfg is config.guard
        assert config.run.clip == built.train_step.clip.threshold == 0.0  # null: off
        assert (config.run.batch_size, config.run.accum, built.micro_batch) == (16, 2, 8)
        assert not config.data.loading.shuffle and not built.trainer.batches.stream.shuffle
        assert config.data.option.n_train == len(built.train_set) == 256
    finally:
        built.close()


def test_lr_scaling_derives_like_any_changed_config(reads):
    """One way to derive: the scaled values are applied to the record and the whole of it read
    again, so the record and the typed parts cannot disagree (scaling the record alone once left
    the optimizer at the LR as written)."""
    config = validate_config(compose_cfg([*RUN, "batch_size=32", "scale_lr.base_batch=8", "schedule.warmup=2"]))
    scaled = config.with_lr_scaling()
    assert scaled.record.schedule.warmup == scaled.schedule.warmup == 1
    assert scaled.record.optim.lr == scaled.optim.options["lr"] == pytest.approx(4 * config.optim.options["lr"])
    assert reads == Counter({schema.__name__: 2 for schema in TYPED})


def test_a_changed_config_is_derived_as_hydra_applies_overrides_and_checked_again():
    config = validate_config(compose_cfg([*RUN, "precision=fp32", "optim.lr=0.01"]))
    changed = config.with_overrides(["precision=bf16", "optim.lr=1e-4", "guard.spike_zscore=null", "logger=none"])
    assert changed.precision.name == "bf16" and changed.record.precision.name == "bf16"  # the option's whole node
    assert changed.optim.options["lr"] == changed.record.optim.lr == 1e-4  # YAML: a float, not the text "1e-4"
    assert changed.guard.spike_zscore is None and changed.logger == {} and changed.device == config.device
    assert config.optim.options["lr"] == 0.01 and config.record.precision.name == "fp32"  # the original is untouched
    with pytest.raises(ConfigError, match="optim.lr"):
        config.with_overrides(["optim.lr=-1"])
