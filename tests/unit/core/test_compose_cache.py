"""The tests' compose_cfg keeps conf/ merged per set of group choices and applies the `key=value`
overrides itself with Hydra's own step: it must give what Hydra's compose gives, errors included."""
from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from conftest import CONF, TINY_GPT, compose_cfg

CASES = [
    [],
    ["trainer.max_steps=5", *TINY_GPT],
    ["model=mlp", "data=synthetic", "optim.lr=0.01", "batch_size=16"],
    ["experiment=pathology/rnn_exploding", "clip=1.0", "diagnose=false"],
    ["+vars.width=16", "model=mlp", "model.width=${vars.width}"],
    ["model=mlp", "~model.depth", "data=custom"],
    ["optim=adamw", "clip=1.0", "objective=[best_val_loss,wall_time_s]"],
    ["+extra={a: 1, b: [2, 3]}", "schedule=cosine"],
    ["hydra.job.name=mine", "model=rnn"],
    ["model.no_such_key=1"],
    ["model=no_such_option"],
    ["optim.lr=1e-3,1e-2"],
]


def _full(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=overrides)


def _outcome(make, overrides: list[str]) -> tuple:
    try:
        cfg = make(overrides)
    except Exception as err:  # the error itself is what is compared
        return type(err).__name__, str(err)
    return OmegaConf.to_yaml(cfg), OmegaConf.is_struct(cfg), OmegaConf.is_readonly(cfg)


@pytest.mark.parametrize("overrides", CASES, ids=[" ".join(c) or "defaults" for c in CASES])
def test_the_kept_merge_composes_what_hydra_composes(overrides):
    for _ in range(2):  # the first call fills the store, the second reads it
        assert _outcome(compose_cfg, overrides) == _outcome(_full, overrides)


def test_a_changed_config_leaves_the_next_one_as_composed():
    changed = compose_cfg(["model=mlp", "model.width=8"])
    changed.model.width, changed.optim.lr = 99, 5.0
    again = compose_cfg(["model=mlp"])
    assert again.model.width == _full(["model=mlp"]).model.width and again.optim.lr == _full([]).optim.lr
