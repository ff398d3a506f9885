"""A checkpoint opens in plain torch: `torch.load(path)` with PyTorch's defaults (weights_only=True)
reads every .pt the harness writes, and its `model` entry loads into a fresh model."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from conftest import train
from harness.state.checkpoint import rng_state, set_rng_state
from user_code import TinyVAE

RUNS = {
    "built-in mlp, fp16 loss scaling": ["model=mlp", "data=synthetic", "precision=fp16"],
    "user objective (a VAE)": ["data=digits", "model._target_=user_code.TinyVAE", "loss._target_=user_code.vae_loss"],
}


@pytest.mark.parametrize("overrides", RUNS.values(), ids=RUNS.keys())
def test_every_checkpoint_opens_with_torch_loads_defaults(tmp_path, overrides):
    if "data=digits" in overrides:
        pytest.importorskip("sklearn", reason="data=digits needs the optional vision extra")
    train([*overrides, "trainer.max_steps=6", "trainer.eval_every=3", "trainer.ckpt_every=3", "logger=none"],
          tmp_path)
    paths = sorted((tmp_path / "checkpoints").glob("*.pt"))
    assert {p.name for p in paths} >= {"best.pt", "step_00000006.pt"}
    for path in paths:
        checkpoint = torch.load(path)  # weights_only=True, PyTorch's default
        assert isinstance(checkpoint["model"], dict) and checkpoint["step"] in (0, 3, 6)
    if "data=digits" in overrides:
        TinyVAE(64).load_state_dict(torch.load(paths[-1])["model"])


def test_the_rng_state_round_trips_and_a_checkpoint_written_before_it_was_plain_still_resumes():
    np.random.seed(3)
    saved = rng_state()
    expected = np.random.rand(4)
    np.random.seed(99)
    set_rng_state(saved)
    assert np.array_equal(np.random.rand(4), expected)
    np.random.seed(3)
    older = {**rng_state(), "numpy": np.random.get_state()}  # the tuple form earlier checkpoints hold
    np.random.seed(99)
    set_rng_state(older)
    assert np.array_equal(np.random.rand(4), expected)
