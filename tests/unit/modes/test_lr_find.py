"""The LR range test: a robust suggestion, real training steps, and no trace left on the model or optimizer."""
from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from conftest import TINY_GPT, compose_cfg, run_cli
from harness.config.run_config import validate_config
from harness.core.errors import ConfigError
from harness.modes.lr_find import LRFindConfig, find_lr, sweep_config
from harness.core.typed_config import read_typed
from harness.modes.lr_find.driver import driven
from harness.modes.lr_find.suggest import suggest_lr
from harness.assembly.assemble import assemble

# one thread per subprocess: spin-waiting OpenMP threads crawl on a busy shared machine
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
VECTOR = ["model=mlp", "data=synthetic", "model.width=32", "logger=none"]


@pytest.fixture
def make_run(tmp_path):
    made = []

    def make(overrides: list[str], sweep: bool = False):
        torch.set_num_threads(1)
        cfg = compose_cfg(overrides)
        config = validate_config(cfg)
        built = assemble(sweep_config(config) if sweep else config, tmp_path / f"run{len(made)}", torch.device("cpu"), None)
        made.append(built)
        return built

    yield make
    for built in made:
        built.close()


# ------------------------------------------------------------------ the suggestion rule
def noisy_curve(seed: int, steepest: float = 1e-3, diverge: float = 1e-1, n: int = 100):
    """A range-test-shaped curve: a plateau, a fall centred on `steepest`, a blow-up past `diverge`, noise."""
    rng = np.random.default_rng(seed)
    lrs = np.geomspace(1e-7, 1.0, n)
    x = np.log10(lrs)
    fall = 2.5 / (1 + np.exp(-(x - np.log10(steepest)) / 0.4))
    blow_up = np.where(x > np.log10(diverge), 4 * (x - np.log10(diverge)) ** 2, 0.0)
    return lrs.tolist(), (5.0 - fall + blow_up + rng.normal(0, 0.15, n)).tolist()


def test_suggestion_is_stable_under_noise_where_two_point_gradients_are_not():
    steepest, suggested, naive = [], [], []
    for seed in range(20):
        lrs, losses = noisy_curve(seed)
        s = suggest_lr(lrs, losses, window=0.1)
        steepest.append(s.steepest_lr)
        suggested.append(s.lr)
        naive.append(lrs[int(np.argmin(np.gradient(losses, np.log10(lrs))))])
    spread = lambda values: np.ptp(np.log10(values))  # noqa: E731 - decades between the extremes
    assert all(1e-3 / 3 < lr < 1e-3 * 3 for lr in steepest), steepest  # the curve's true steepest point: 1e-3
    assert spread(suggested) < 1.0 and spread(naive) > 2 * spread(suggested), (suggested, naive)


def test_suggestion_lies_between_the_steepest_descent_and_the_minimum():
    lrs, losses = noisy_curve(0)
    s = suggest_lr(lrs, losses, window=0.1)
    assert s.lr == pytest.approx(np.sqrt(s.steepest_lr * s.minimum_lr))
    assert s.steepest_lr < s.lr < s.minimum_lr and 1e-2 < s.minimum_lr < 2e-1  # the blow-up starts at 1e-1


def test_one_wild_batch_does_not_move_the_suggestion():
    lrs, losses = noisy_curve(2)
    clean = suggest_lr(lrs, losses, window=0.1).lr
    for at in (35, 45, 55, 65, 70):  # a stray batch on the plateau, in the descent, near the minimum
        spiked = list(losses)
        spiked[at] += 5.0
        ratio = suggest_lr(lrs, spiked, window=0.1).lr / clean
        assert 1 / 1.5 < ratio < 1.5, (at, ratio)  # means alone (no running median) move it up to 4x


def test_a_loss_that_only_rises_gets_a_warning_and_a_low_suggestion():
    lrs = np.geomspace(1e-5, 1.0, 50).tolist()
    s = suggest_lr(lrs, (np.linspace(2, 6, 50) + np.random.default_rng(0).normal(0, 0.05, 50)).tolist(), 0.1)
    assert "no descent" in s.note and s.lr < lrs[5]


def test_a_fall_within_the_noise_is_flagged_unreliable():
    lrs = np.geomspace(1e-7, 1.0, 30).tolist()
    flat = (2.3 + np.random.default_rng(0).normal(0, 0.05, 30)).tolist()
    assert suggest_lr(lrs, flat, 0.1).note.startswith("unreliable")
    assert suggest_lr(*noisy_curve(0), 0.1).note == ""


# ------------------------------------------------------------------ the sweep on a real trainer
def test_sweep_leaves_model_optimizer_and_data_exactly_as_before(make_run):
    overrides = [*VECTOR, "model.dropout=0.1", "accum=2", "batch_size=16"]
    swept, untouched = make_run(overrides, sweep=True), make_run(overrides, sweep=True)
    for built in (swept, untouched):  # optimizer moments, a scheduler and a data position to preserve
        torch.manual_seed(0)  # the two share the global RNG (dropout): give both the same draws
        for _ in range(3):
            built.trainer.update()
    rng = torch.get_rng_state()
    optimizer_before = copy.deepcopy(swept.optimizer.state_dict())

    find_lr(swept, LRFindConfig(num_steps=30, max_lr=10.0))

    assert all(torch.equal(a, b) for a, b in zip(swept.raw_model.parameters(), untouched.raw_model.parameters()))
    after = swept.optimizer.state_dict()
    assert after["param_groups"] == optimizer_before["param_groups"]
    for key, state in optimizer_before["state"].items():
        assert all(torch.equal(torch.as_tensor(v), torch.as_tensor(after["state"][key][k])) for k, v in state.items())
    assert swept.trainer.state.step == 3 and swept.live_lr.scheduler.last_epoch == 3
    assert torch.equal(torch.get_rng_state(), rng)
    for built in (swept, untouched):  # same dropout draws, next batch and LR: the same update
        torch.set_rng_state(rng)
        built.trainer.update()
    assert all(torch.equal(a, b) for a, b in zip(swept.raw_model.parameters(), untouched.raw_model.parameters()))


def test_recorded_loss_is_the_batch_mean_across_accumulation(make_run):
    built = make_run([*VECTOR, "accum=4", "batch_size=16"])
    x, y = built.train_set.gather(copy.deepcopy(built.trainer.batches.stream).next_batch())
    with torch.no_grad():
        expected = built.objective.score(built.raw_model, x, y).loss.item()
    with driven(built) as driver:
        assert driver.step(1e-12) == pytest.approx(expected, rel=1e-5)


def test_every_param_group_keeps_its_ratio_to_optim_lr(make_run):
    built = make_run([*TINY_GPT, "optim=muon", "logger=none"])  # Muon groups at lr, AdamW groups at lr/20
    seen = []
    built.optimizer.register_step_pre_hook(lambda opt, *_: seen.append([g["lr"] for g in opt.param_groups]))
    with driven(built) as driver:
        driver.step(4e-3)
    assert sorted(set(seen[0])) == pytest.approx([2e-4, 4e-3])


@pytest.mark.trajectory
def test_sweep_counts_updates_like_training_does(make_run):
    built = make_run([*VECTOR, "fault=inf_loss", "fault.at=[5]"], sweep=True)  # update 5's loss is +Inf
    sweep, _ = find_lr(built, LRFindConfig(num_steps=30))
    assert len(sweep.lrs) == 4 and sweep.stop_reason.startswith("non-finite loss or gradients")


@pytest.mark.trajectory
def test_sweep_stops_when_the_loss_diverges(make_run):
    built = make_run([*VECTOR, "optim=sgd", "clip=null"], sweep=True)
    sweep, suggestion = find_lr(built, LRFindConfig(num_steps=60, min_lr=1e-4, max_lr=1e4))
    assert len(sweep.lrs) < 60 and ("diverged" in sweep.stop_reason or "non-finite" in sweep.stop_reason)
    assert suggestion.lr < sweep.lrs[-1] / 10


def test_a_sweep_that_breaks_at_once_asks_for_a_lower_min_lr(make_run):
    built = make_run([*VECTOR, "optim=sgd", "clip=null"], sweep=True)
    with pytest.raises(ConfigError) as info:
        find_lr(built, LRFindConfig(num_steps=20, min_lr=1e8, max_lr=1e9))
    assert info.value.key == "lr_find.min_lr" and "stopped after 1" in str(info.value)


# ------------------------------------------------------------------ config and command line
@pytest.mark.parametrize("override,key", [("++lr_find.max_lr=1e-9", "lr_find.max_lr"),
                                          ("++lr_find.num_steps=3", "lr_find.num_steps"),
                                          ("++lr_find.steps=50", "lr_find.steps")])
def test_bad_settings_are_one_line_config_errors(override, key):
    cfg = compose_cfg([override])
    with pytest.raises(ConfigError) as info:  # as a run reads it: its keys, then its settings
        validate_config(cfg)
        read_typed(cfg.lr_find, LRFindConfig, "lr_find")
    assert info.value.key == key


def test_cli_writes_plot_and_json_and_prints_the_override(tmp_path):
    result = run_cli(["mode=lr_find", f"hydra.run.dir={tmp_path}", *VECTOR, "++lr_find.num_steps=40"], env=ONE_THREAD)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "lr_find.json").read_text())
    assert len(data["lrs"]) == len(data["losses"]) == len(data["smoothed"]) == len(data["curve"]) <= 40
    assert data["lrs"][0] == pytest.approx(1e-7) and data["rule"] and data["settings"]["num_steps"] == 40
    assert f"use {data['override']}" in result.stdout + result.stderr
    assert f"[INFO] run dir: {tmp_path}" in result.stdout
    assert data["override"] == f"optim.lr={data['suggestion']:.1e}"
    assert (tmp_path / "lr_find.png").read_bytes()[:4] == b"\x89PNG"


def test_debug_smoke_shortens_the_sweep(tmp_path):
    from harness.modes.run import run

    run(compose_cfg(["mode=lr_find", "debug=smoke", *TINY_GPT, "logger=none"]), run_dir=tmp_path)
    data = json.loads((tmp_path / "lr_find.json").read_text())
    assert data["settings"]["num_steps"] == 20 and len(data["lrs"]) <= 20
