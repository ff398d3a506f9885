"""Model-level facts users rely on."""
from __future__ import annotations

import math

import torch
from omegaconf import OmegaConf

from conftest import CONF, compose_cfg, train
from harness.data import build_data, validate_data_config
from harness.models import build_model, model_spec
from harness.logger.tracking import read_metrics


def test_char_gpt_first_loss_is_ln_vocab(tmp_path):
    """An untrained model should be uniformly unsure: loss = ln(vocab size) on the default data."""
    run = tmp_path / "run"
    train(["trainer.max_steps=2", "trainer.log_every=1", "schedule.warmup=0", "batch_size=32"], run)
    first = next(r for r in read_metrics(run) if r["kind"] == "train")
    _, _, meta = build_data(validate_data_config(compose_cfg([]).data))
    assert first["step"] == 1
    assert abs(first["train/loss"] - math.log(meta.vocab_size)) < 0.1


def test_gpt_switches_build_and_run():
    _, _, meta = build_data(validate_data_config(compose_cfg([]).data))
    base = OmegaConf.load(CONF / "model" / "gpt.yaml")
    for extra in ({"ln_position": "post"}, {"qk_norm": True}, {"tie_embeddings": True},
                  {"activation_checkpointing": True}, {"bias": True, "dropout": 0.1}):
        model = build_model(model_spec(OmegaConf.merge(base, {"n_layer": 2, **extra})), meta)
        x = torch.randint(0, meta.vocab_size, (2, 16))
        out = model(x)
        assert out.shape == (2, 16, meta.vocab_size)
        out.sum().backward()
        assert all(p.grad is not None for p in model.parameters())
    tied = build_model(model_spec(OmegaConf.merge(base, {"tie_embeddings": True})), meta)
    assert tied.lm_head.weight is tied.wte.weight


def test_user_model_by_target_gets_data_sizes():
    cfg = OmegaConf.create({"_target_": "torch.nn.Linear", "bias": False})
    _, _, meta = build_data(validate_data_config(compose_cfg(["data=synthetic"]).data))
    model = build_model(model_spec(cfg), meta)
    assert isinstance(model, torch.nn.Linear) and model.in_features == meta.in_features
    assert model.out_features == meta.out_features and model.bias is None
