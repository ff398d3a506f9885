import json

import pytest
from omegaconf import OmegaConf

from conftest import compose_cfg, train
from harness.config.run_config import validate_config
from harness.core.errors import ConfigError


@pytest.mark.parametrize("rule,factor", [("linear", 4.0), ("sqrt", 2.0)])
def test_lr_and_warmup_follow_the_batch(rule, factor):
    cfg = compose_cfg(["batch_size=32", "scale_lr.base_batch=8", f"scale_lr.rule={rule}", "optim.lr=1e-3",
                       "schedule.warmup=100"])
    config = validate_config(cfg).with_lr_scaling()
    scaled = config.record
    assert scaled.optim.lr == pytest.approx(1e-3 * factor)
    assert config.optim.options["lr"] == pytest.approx(1e-3 * factor)  # what the optimizer is built with
    assert scaled.schedule.warmup == 25  # the same 3200 warmup samples at 4x the batch
    assert cfg.optim.lr == 1e-3  # the user's config is not modified


def test_off_by_default_and_fractions_stay():
    config = validate_config(compose_cfg([]))
    assert config.with_lr_scaling() is config
    scaled = validate_config(compose_cfg(["batch_size=64", "scale_lr.base_batch=32", "schedule.warmup=0.1"]))
    assert scaled.with_lr_scaling().record.schedule.warmup == 0.1


def test_the_run_trains_with_the_scaled_values(tmp_path):
    run = tmp_path / "run"
    train(["model=mlp", "data=synthetic", "debug=smoke", "batch_size=16", "scale_lr.base_batch=8", "optim.lr=1e-3",
           "schedule.warmup=2"], run)  # a warmup in steps shrinks by k; a fraction stays as it is
    used = OmegaConf.load(run / "config.yaml")
    assert used.optim.lr == pytest.approx(2e-3) and used.schedule.warmup == 1
    lrs = [row["train/lr"] for row in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
           if "train/lr" in row]
    assert max(lrs) > 1.5e-3  # the optimizer trained at the scaled LR, not the 1e-3 the user wrote


def test_bad_base_batch():
    with pytest.raises(ConfigError, match="scale_lr.base_batch"):
        validate_config(compose_cfg(["scale_lr.base_batch=0"]))


def test_an_optimizer_without_an_lr_cannot_be_scaled():
    with pytest.raises(ConfigError, match="scale_lr.base_batch=8 .*no lr to scale"):
        validate_config(compose_cfg(["scale_lr.base_batch=8", "~optim.lr"])).with_lr_scaling()


def test_scaling_that_changes_nothing_needs_no_lr():
    config = validate_config(compose_cfg(["batch_size=32", "scale_lr.base_batch=32", "~optim.lr"]))
    assert config.with_lr_scaling() is config
