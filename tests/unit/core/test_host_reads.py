"""Non-logging steps read nothing off the device: the guard decides there, fused optimizers skip there."""
from __future__ import annotations

import pytest
import torch

from conftest import TINY_GPT, compose_cfg
from harness.assembly.assemble import assemble
from harness.config.run_config import validate_config
from harness.core.host_reads import count_host_reads

LOG_EVERY = 5


def reads_per_step(overrides: list[str], tmp_path, steps: int = 12) -> tuple[list[int], list[int]]:
    """Host reads of each non-logging and each logging step of a fresh run, as `fit` drives it."""
    cfg = compose_cfg([*overrides, "logger=none", f"trainer.log_every={LOG_EVERY}", "trainer.max_steps=50"])
    built = assemble(validate_config(cfg), tmp_path, torch.device("cpu"), resume_from=None)
    trainer = built.trainer
    quiet, logging = [], []
    for _ in range(steps):
        with count_host_reads() as seen:
            logged = trainer.advance()
        (logging if logged else quiet).append(seen.count)
    trainer.close()
    return quiet, logging


@pytest.mark.parametrize("extra", [[], ["precision=fp16", "accum=2"], ["precision=bf16"]],
                         ids=["default", "fp16-accum2", "bf16"])
def test_default_gpt_steps_make_no_host_read_between_logging_steps(tmp_path, extra):
    quiet, logging = reads_per_step([*TINY_GPT, *extra], tmp_path)
    assert quiet == [0] * len(quiet)
    assert all(n > 0 for n in logging)  # the counter does see the reads a logging step makes


@pytest.mark.parametrize("optim", ["adam", "sgd"])
def test_other_fused_optimizers_skip_on_the_device_too(tmp_path, optim):
    quiet, _ = reads_per_step(["model=mlp", "data=synthetic", f"optim={optim}"], tmp_path)
    assert quiet == [0] * len(quiet)


@pytest.mark.parametrize("optim", ["lion", "adamw optim.fused=false"])
def test_optimizers_without_a_device_skip_read_once_per_update(tmp_path, optim):
    quiet, _ = reads_per_step(["model=mlp", "data=synthetic", *f"optim={optim}".split()], tmp_path)
    assert quiet == [1] * len(quiet)


def test_guard_off_reads_nothing_whatever_the_optimizer(tmp_path):
    quiet, _ = reads_per_step(["model=mlp", "data=synthetic", "optim=lion", "guard=off"], tmp_path)
    assert quiet == [0] * len(quiet)


def test_counter_sees_python_and_dispatch_level_reads():
    t = torch.arange(4.0)
    with count_host_reads() as seen:
        t.sum().item()
        bool(t.max() > 2)
        t.tolist()
        float(t[0])
        t[t > 1]  # a mask's size is data: the host must learn it
        torch.nonzero(t)
        t * 2 + 1  # no read
    assert [what for what, _ in seen.reads] == ["Tensor.item", "Tensor.__bool__", "Tensor.tolist", "Tensor.__float__",
                                                "aten.index", "aten.nonzero"]
    assert all(where.endswith(".py:" + where.rsplit(":", 1)[1]) and __file__ in where for _, where in seen.reads)
    assert "item" not in torch.Tensor.__dict__  # the patches are gone afterwards
