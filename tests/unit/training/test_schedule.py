import math

import pytest
import torch
from omegaconf import OmegaConf

from harness.core.errors import ConfigError
from harness.training.schedule import build_scheduler, lr_factor, schedule_config, validate_schedule_config

T, W, MIN = 1000, 100, 0.1


def lrs(name: str, **extra) -> list[float]:
    """LR seen by the optimizer at every step 0..T-1 through a real LambdaLR."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    cfg = OmegaConf.create({"name": name, "warmup": W, "min_lr_ratio": MIN, **extra})
    sched = build_scheduler(schedule_config(cfg), opt, T)
    out = []
    for _ in range(T):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


@pytest.mark.parametrize("name", ["constant", "linear", "cosine", "poly", "inverse_sqrt", "wsd"])
def test_warmup_ends_at_base_lr_and_rises_linearly(name):
    lr = lrs(name)
    assert lr[W] == pytest.approx(1.0)
    assert lr[0] == pytest.approx(1 / (W + 1))
    assert all(a < b for a, b in zip(lr[:W], lr[1 : W + 1]))


def test_cosine_closed_form():
    lr = lrs("cosine")
    last = T - 1
    for s in (W, 300, 555, 900, last):
        p = (s - W) / (last - W)
        assert lr[s] == pytest.approx(MIN + (1 - MIN) * 0.5 * (1 + math.cos(math.pi * p)))
    assert lr[last] == pytest.approx(MIN)


def test_cosine_midpoint_exact():
    # with an even decay span the midpoint is a real step
    f = lr_factor(W + 450, name="cosine", warmup=W, max_steps=W + 901, min_lr_ratio=MIN)
    assert f == pytest.approx(MIN + (1 - MIN) / 2)


def test_linear_poly_inverse_sqrt_wsd_closed_forms():
    last = T - 1
    lin, poly, isq = lrs("linear"), lrs("poly", power=2.0), lrs("inverse_sqrt")
    for s in (W, 400, 777, last):
        p = (s - W) / (last - W)
        assert lin[s] == pytest.approx(MIN + (1 - MIN) * (1 - p))
        assert poly[s] == pytest.approx(MIN + (1 - MIN) * (1 - p) ** 2)
        assert isq[s] == pytest.approx(math.sqrt(W / s))
    wsd = lrs("wsd", decay_fraction=0.2)
    decay_start = last - 200
    assert wsd[W] == wsd[decay_start] == pytest.approx(1.0)
    assert wsd[decay_start + 100] == pytest.approx(MIN + (1 - MIN) * 0.5)
    assert wsd[last] == pytest.approx(MIN)
    assert lrs("constant")[last] == pytest.approx(1.0)


def test_warmup_fraction():
    f = lr_factor(99, name="constant", warmup=100, max_steps=1000)
    assert f < 1.0
    cfg = OmegaConf.create({"name": "cosine", "warmup": 0.1})
    settings = validate_schedule_config(cfg, 1000)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    sched = build_scheduler(settings, opt, 1000)
    for _ in range(100):
        opt.step()
        sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [{"warmup": 1000}, {"warmup": -1}, {"warmup": 1.5}, {"name": "step"},
                                 {"min_lr_ratio": 2.0}])
def test_bad_schedule_values(bad):
    cfg = OmegaConf.create({"name": "cosine", "warmup": 10, "min_lr_ratio": 0.1, **bad})
    with pytest.raises(ConfigError) as err:
        validate_schedule_config(cfg, 1000)
    assert f"schedule.{next(iter(bad))}" in str(err.value)
