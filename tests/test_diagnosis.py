"""The diagnosis rules on synthetic run directories, the report and scripts/diagnose.py.

Every rule gets a run that shows its pathology and must name it; the healthy baseline they are
all derived from must get no finding, so each rule is also checked against false alarms.
"""
from __future__ import annotations

import copy
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from conftest import ROOT
from harness.diagnosis import RULES, Finding, MissingMetricsError, Severity, diagnose, load_run, write_report

STEPS = list(range(10, 410, 10))  # 40 logged updates of a 400-step run
EVAL_STEPS = [100, 200, 300, 400]
LAYERS = ["stem.0.weight", "hidden.0.linear.weight", "hidden.0.linear.bias", "hidden.1.linear.weight",
          "hidden.1.linear.bias", "hidden.2.linear.weight", "hidden.2.linear.bias", "head.weight"]
CHANCE = math.log(10)


class Run:
    """A healthy 400-step run of a ReLU MLP on a 10-class task; tests bend one thing and write it."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.config = {"clip": 1.0, "clip_mode": "norm", "accum": 1, "accum_reduction": "mean", "batch_size": 32,
                       "trainer": {"max_steps": 400, "log_every": 10, "eval_every": 100},
                       "schedule": {"name": "cosine", "warmup": 20, "min_lr_ratio": 0.1},
                       "precision": {"name": "fp32"}, "optim": {"lr": 1e-3},
                       "model": {"activation": "relu", "residual": False, "depth": 4},
                       "guard": {"skip_nonfinite": True, "spike_zscore": 6.0}}
        self.summary = {"status": "completed", "reason": None, "steps": 400, "max_steps": 400,
                        "best_val_loss": None, "final_val_loss": None, "final_train_loss": None,
                        "best_val_accuracy": 0.8, "skipped_steps": 0, "overflow_steps": 0, "events": [],
                        "task": "classification", "chance_loss": CHANCE, "optimum_loss": 0.0}
        self.train = []
        for step in STEPS:
            loss = 0.5 + 1.8 * math.exp(-step / 120) + rng.normal(0, 0.02)
            pre = 0.8 + 0.2 * rng.random()
            row = {"step": step, "kind": "train", "train/loss": loss, "train/lr": self.cosine_lr(step),
                   "grad/norm_preclip": pre, "grad/norm_postclip": pre, "grad/clip_rate": 0.0,
                   "train/skipped_steps": 0.0, "perf/step_time_ms": 5.0, "perf/samples_per_s": 6400.0}
            for name in LAYERS:
                row[f"grad_norm/{name}"] = 0.1 * (1 + 0.2 * rng.random())
                row[f"param_norm/{name}"] = 5.0
                row[f"update_ratio/{name}"] = 1e-3
            row["param/norm_total"] = 20 + 3 * (1 - math.exp(-step / 100))
            for module in ("stem.1", "hidden.0.act", "hidden.1.act", "hidden.2.act"):
                row[f"act_dead/{module}"] = 0.05
            self.train.append(row)
        self.evals = [{"step": s, "kind": "eval", "val/loss": 0.55 + 1.8 * math.exp(-s / 120), "val/accuracy": 0.8}
                      for s in EVAL_STEPS]

    @staticmethod
    def loss_at(step: int) -> float:
        return 0.5 + 1.8 * math.exp(-step / 120)

    @staticmethod
    def cosine_lr(step: int, total: int = 400, warmup: int = 20) -> float:
        if step < warmup:
            return 1e-3 * step / warmup
        return 1e-4 + 0.9e-3 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    def val_follows_train(self) -> Run:
        """The val loss where the train loss is at each eval: a model hurt as a whole, not a train
        loss lifted by a few samples while the model keeps improving."""
        at = {row["step"]: row["train/loss"] for row in self.train}
        return self.set("val/loss", lambda s, v: at.get(s, v) + 0.05, kind="eval")

    def set(self, key: str, values, kind: str = "train") -> Run:
        """Replace one metric: `values` is a list (one per row) or a function of (step, old value)."""
        rows = self.train if kind == "train" else self.evals
        for i, row in enumerate(rows):
            row[key] = values(row["step"], row.get(key)) if callable(values) else values[i]
        return self

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(OmegaConf.create(self.config), run_dir / "config.yaml")
        summary = copy.deepcopy(self.summary)
        finite_val = [r["val/loss"] for r in self.evals if math.isfinite(r["val/loss"])]
        summary["best_val_loss"] = summary["best_val_loss"] or (min(finite_val) if finite_val else None)
        (run_dir / "summary.json").write_text(json.dumps(summary))
        rows = sorted(self.train + self.evals, key=lambda r: (r["step"], r["kind"] == "eval"))
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return run_dir

    def findings(self, tmp_path: Path) -> dict[str, Finding]:
        return {f.name: f for f in diagnose(load_run(self.write(tmp_path / "run")))}


# ---------------------------------------------------------------------------- the healthy baseline
def test_healthy_run_gets_no_finding(tmp_path):
    assert Run().findings(tmp_path) == {}


def test_finding_fields_and_summary_line(tmp_path):
    run = Run().set("train/loss", lambda s, v: v if s < 200 else float("nan"))
    run.summary.update(status="diverged", reason="step 200: training loss is nan; stopping", steps=200)
    finding = run.findings(tmp_path)["diverging"]
    assert finding.severity is Severity.CRITICAL
    line = finding.summary_line()
    assert line.startswith("diverging [critical]: ") and "\n" not in line
    assert "step 200" in finding.evidence and finding.fix in line


# ---------------------------------------------------------------------------- loss-curve rules
def test_diverging_on_nan(tmp_path):
    run = Run().set("train/loss", lambda s, v: v if s < 150 else (40.0 if s == 150 else float("nan")))
    evidence = run.findings(tmp_path)["diverging"].evidence
    assert "nan at step 160" in evidence and "40" in evidence


def test_diverging_on_a_rising_finite_loss(tmp_path):
    run = Run().set("train/loss", lambda s, v: 2.3 * (1 + s / 100)).val_follows_train()
    assert "diverging" in run.findings(tmp_path)
    run = Run().set("train/loss", lambda s, v: 2.3 * (1 + s / 100))  # the model itself kept improving...
    run.summary["input_outliers"] = {"checked": 512, "count": 6, "median_norm": 3.0, "samples": []}
    assert "diverging" not in run.findings(tmp_path / "val_fine")  # ...while a few huge samples lifted the train loss
    run.summary["input_outliers"]["count"] = 0
    run.set("val/loss", [1.0, 0.9, 0.95, 0.85], kind="eval")
    assert "diverging" in run.findings(tmp_path / "no_outliers")
    run.set("val/loss", [1.0, 0.9, 0.87, 0.85], kind="eval")  # fell at every eval: the model is learning
    assert "diverging" not in run.findings(tmp_path / "val_fell")


def test_diverging_inside_the_first_window_is_seen_through_the_window_maximum(tmp_path):
    """A far too high LR: one update's loss explodes inside the first log window, the logged means
    then sit on a high plateau that never rises above its first point."""
    run = Run().set("train/loss", lambda s, v: 6.0 - 0.001 * s).set("train/loss_max", lambda s, v: 60.0 if s == 10 else 6.5)
    run.val_follows_train()
    finding = run.findings(tmp_path)["diverging"]
    assert "reached 60 in the window ending at step 10" in finding.evidence and "optim.lr" in finding.fix


def test_a_window_maximum_near_chance_is_not_a_blowup(tmp_path):
    run = Run().set("train/loss_max", lambda s, v: 1.1 * CHANCE if s == 10 else 1.0)
    assert "diverging" not in run.findings(tmp_path)


def test_a_loss_a_third_above_chance_is_a_blowup(tmp_path):
    """SGD at 40x its LR: the first window's worst update reaches 1.3x ln K, then the units die and the
    logged means sit near chance, never rising above their first point."""
    run = Run().set("train/loss", lambda s, v: CHANCE * 1.03).set("train/loss_max",
                                                                  lambda s, v: 1.3 * CHANCE if s == 10 else CHANCE)
    run.val_follows_train()
    assert "1.3x chance" in run.findings(tmp_path)["diverging"].evidence


@pytest.mark.parametrize("after, flagged", [("recovered", False), ("worse", True), ("at_chance", True)])
def test_a_mid_run_blowup_is_a_divergence_only_when_the_run_is_worse_off(tmp_path, after, flagged):
    """One window at 1.8x the first loss at step 150: a run that then ends at its best came back
    from it; one that ends above where it was, or where it started, did not."""
    run = Run().set("train/loss_max", lambda s, v: 1.8 * CHANCE if s == 150 else v)
    if after == "worse":
        run.set("train/loss", lambda s, v: v if s < 150 else 1.6).val_follows_train()
    elif after == "at_chance":
        run.set("train/loss", lambda s, v: CHANCE * 1.01).set("val/loss", lambda s, v: CHANCE, kind="eval")
    found = run.findings(tmp_path)
    assert ("diverging" in found) is flagged
    if flagged:
        assert found["diverging"].severity is Severity.CRITICAL and "step 150" in found["diverging"].evidence


def test_single_update_noise_raises_the_blowup_bar(tmp_path):
    """Windows whose worst update sits 1.8x their mean (a batch of one): a first window peaking at
    1.7x chance is that noise; the same peak in a run whose windows hold their mean (1.02x, a
    steady batch) is a blow-up."""
    def peaked(spread: float) -> Run:
        run = Run().set("train/loss_max", lambda s, v: 1.7 * CHANCE if s == 10 else spread * Run.loss_at(s))
        return run.set("train/loss", lambda s, v: CHANCE * 1.03 if s == 10 else Run.loss_at(s))

    noisy = peaked(1.8).findings(tmp_path / "noisy")
    assert "diverging" not in noisy and "loss_spikes" not in noisy
    steady = peaked(1.02).set("val/loss", [1.0, 0.8, 0.85, 0.7], kind="eval")  # not a fall at every eval
    assert "1.7x chance" in steady.findings(tmp_path / "steady")["diverging"].evidence


def test_a_first_window_peak_inside_the_untrained_models_own_spread_is_no_blowup(tmp_path):
    """Raw inputs: the untrained model's losses on a few batches already reach 2x chance, so a
    first-window peak at 1.7x chance is where it started; batches that all start near chance make
    the same peak a blow-up."""
    run = Run().set("train/loss_max", lambda s, v: 1.7 * CHANCE if s == 10 else 1.02 * Run.loss_at(s))
    run.set("val/loss", [1.0, 0.8, 0.85, 0.7], kind="eval")
    run.summary["initial_losses"] = [CHANCE, 2.0 * CHANCE, 1.2 * CHANCE]
    assert "diverging" not in run.findings(tmp_path / "wide")
    run.summary["initial_losses"] = [CHANCE, 1.01 * CHANCE, 0.99 * CHANCE]
    assert "loss over 3 batches = 2.33" in run.findings(tmp_path / "tight")["diverging"].evidence


def test_a_run_whose_val_loss_keeps_falling_through_a_spike_is_not_diverging(tmp_path):
    """One update at 2x chance at step 200, after which the train loss sits at 1.5, far above its
    best so far (0.87): while the val loss keeps falling to its best, that is a spike in a noisy
    run, not a divergence; with the val loss following the train loss up, it is one."""
    run = Run().set("train/loss_max", lambda s, v: 2 * CHANCE if s == 200 else 1.05 * Run.loss_at(s))
    run.set("train/loss", lambda s, v: Run.loss_at(s) if s < 200 else 1.5)
    assert "diverging" not in run.findings(tmp_path / "falling")
    assert "diverging" in run.val_follows_train().findings(tmp_path / "following")


def test_diverging_fix_names_the_accumulation_bug(tmp_path):
    run = Run().set("train/loss", lambda s, v: 2.3 * (1 + s / 100)).val_follows_train()
    run.config.update(accum=8, accum_reduction="sum")
    assert "accum_reduction=mean" in run.findings(tmp_path)["diverging"].fix


def test_plateau_at_chance(tmp_path):
    rng = np.random.default_rng(1)
    run = Run().set("train/loss", lambda s, v: CHANCE + rng.normal(0, 0.02))
    run.set("val/loss", lambda s, v: CHANCE - 0.01, kind="eval")
    run.summary["best_val_accuracy"] = 0.11
    found = run.findings(tmp_path)
    assert set(found) == {"plateau_at_chance"}
    assert "ln(10)" in found["plateau_at_chance"].evidence


def test_a_loss_near_chance_with_accuracy_well_above_it_is_not_chance(tmp_path):
    """Many classes: the loss can sit inside the 5% band of ln K while the model classifies far better than 1/K."""
    chance = math.log(100)
    run = Run().set("train/loss", lambda s, v: 0.97 * chance)
    run.set("val/loss", lambda s, v: 0.97 * chance, kind="eval")
    run.summary.update(chance_loss=chance, best_val_accuracy=0.09)  # 9x chance
    assert "plateau_at_chance" not in run.findings(tmp_path)
    run.summary["best_val_accuracy"] = 0.012
    assert "plateau_at_chance" in run.findings(tmp_path)


PRIOR = 1.5  # the targets' entropy on an unbalanced 10-class task, well below ln 10 = 2.30


def test_plateau_at_prior(tmp_path):
    rng = np.random.default_rng(2)
    run = Run().set("train/loss", lambda s, v: PRIOR + 0.8 * math.exp(-s / 30) + rng.normal(0, 0.01))
    run.set("val/loss", lambda s, v: PRIOR + 0.01, kind="eval")
    run.summary.update(prior_loss=PRIOR, best_val_accuracy=0.45)
    found = run.findings(tmp_path)
    assert set(found) == {"plateau_at_prior"}
    assert found["plateau_at_prior"].severity is Severity.CRITICAL and fmt_in(PRIOR, found["plateau_at_prior"].evidence)
    run.summary.update(task="regression", loss_function="bce", chance_loss=None)  # multi-label: its own prior
    assert "the best constant under bce (the targets' mean probability)" in \
        run.findings(tmp_path / "bce")["plateau_at_prior"].evidence


def test_a_run_falling_through_the_prior_is_not_stuck_there(tmp_path):
    """A healthy run crosses the prior on its way down; the end of a short one may sit near it, still falling."""
    run = Run().set("train/loss", lambda s, v: 2.3 - 0.002 * s)  # 1.5 at the midpoint of the second half
    run.set("val/loss", lambda s, v: 2.3 - 0.002 * s, kind="eval")
    run.summary.update(prior_loss=PRIOR)
    assert "plateau_at_prior" not in run.findings(tmp_path)
    run.summary.update(prior_loss=0.97 * CHANCE)  # a prior at chance is plateau_at_chance's to name
    assert "plateau_at_prior" not in Run().set("train/loss", lambda s, v: 0.97 * CHANCE).findings(tmp_path / "b")


def fmt_in(value: float, text: str) -> bool:
    return f"{value:.3g}" in text


def test_plateau_is_not_judged_before_the_run_had_time_at_full_lr(tmp_path):
    """A run still at chance when its warmup has barely ended (or a 6-step smoke run) is not stuck."""
    run = Run().set("train/loss", lambda s, v: CHANCE)
    run.set("val/loss", lambda s, v: CHANCE, kind="eval")
    run.config["schedule"]["warmup"] = 360
    assert "plateau_at_chance" not in run.findings(tmp_path)


def test_plateau_needs_the_loss_near_chance(tmp_path):
    run = Run().set("train/loss", lambda s, v: 0.85 * CHANCE)
    run.set("val/loss", lambda s, v: 0.85 * CHANCE, kind="eval")
    assert "plateau_at_chance" not in run.findings(tmp_path)


def bumps(step: int, value: float) -> float:
    """Three climbs of +60% over three log points each, on top of the healthy curve."""
    return value * 1.6 if step in (100, 110, 120, 200, 210, 220, 300, 310, 320) else value


def test_oscillating(tmp_path):
    run = Run().set("train/loss", bumps)
    found = run.findings(tmp_path)
    assert "oscillating" in found and "3 climbs" in found["oscillating"].evidence


def test_climbs_right_after_guard_events_are_not_oscillation(tmp_path):
    run = Run().set("train/loss", bumps)
    climbs = [int(step) for step in re.findall(r"at step (\d+)", run.findings(tmp_path)["oscillating"].evidence)]
    run.summary["events"] = [{"step": climbs[0] - 10, "kind": "rollback", "message": "rolled back"},
                             {"step": climbs[1], "kind": "skip_nonfinite", "message": "skipped"}]
    assert "oscillating" not in run.findings(tmp_path / "b")


def test_batch_noise_is_not_oscillation(tmp_path):
    """White noise of +-30% on every logged point (small batches logged every step) is not instability."""
    rng = np.random.default_rng(2)
    run = Run().set("train/loss", lambda s, v: v * (1 + 0.3 * rng.uniform(-1, 1)))
    assert "oscillating" not in run.findings(tmp_path)


def test_overfitting(tmp_path):
    run = Run().set("train/loss", lambda s, v: 2.0 * math.exp(-s / 60))
    run.set("val/loss", [1.0, 1.1, 1.3, 1.5], kind="eval")
    evidence = run.findings(tmp_path)["overfitting"].evidence
    assert "best 1 at step 100" in evidence and "last 1.5 at step 400" in evidence


def steady_then_rising(rise: float, wobble: float) -> list[float]:
    """Twelve evals: the best at the third, then a steady climb to +`rise`, each eval off by +-`wobble`."""
    trend = [1.3, 1.1, 1.0] + [1.0 + rise * i / 8 for i in range(1, 10)]
    return [v * (1 + wobble * (-1) ** i) for i, v in enumerate(trend)]


@pytest.mark.parametrize("rise,wobble,flagged", [(0.10, 0.0, True), (0.10, 0.04, False), (0.04, 0.0, False)])
def test_overfitting_threshold_follows_the_eval_noise(tmp_path, rise, wobble, flagged):
    """A steady +10% over a quiet val curve is overfitting; the same rise inside +-4% eval-to-eval
    noise is not, nor is a +4% drift (below the floor a decaying LR's val wobble needs)."""
    run = Run().set("train/loss", lambda s, v: 2.0 * math.exp(-s / 60))
    run.evals = [{"step": s, "kind": "eval", "val/loss": v} for s, v in zip(range(40, 520, 40), steady_then_rising(rise, wobble))]
    run.config["trainer"]["max_steps"] = run.summary["max_steps"] = 480
    assert ("overfitting" in run.findings(tmp_path)) is flagged


@pytest.mark.parametrize("val_rises, flagged", [([1.0, 1.03, 1.07, 1.10, 1.13], True),
                                                 ([1.0, 1.08, 1.05, 1.12, 1.10], False)])
def test_a_gap_that_widens_at_every_eval_is_overfitting_with_a_smaller_train_drop(tmp_path, val_rises, flagged):
    """Train falls 18% after the val loss's best (short of the 20% the rule asks without a trend)."""
    evals = [200, 250, 300, 350, 400]
    run = Run().set("train/loss", lambda s, v: 1.0 if s <= 200 else 1.0 - 0.18 * (s - 200) / 200)
    run.evals = [{"step": s, "kind": "eval", "val/loss": 1.1 * r, "val/accuracy": 0.8} for s, r in zip(evals, val_rises)]
    assert ("overfitting" in run.findings(tmp_path)) is flagged


def test_a_noisy_val_rise_without_train_progress_is_not_overfitting(tmp_path):
    run = Run().set("train/loss", lambda s, v: 0.6)
    run.set("val/loss", [0.6, 0.55, 0.7, 0.65], kind="eval")
    assert "overfitting" not in run.findings(tmp_path)


def test_underfitting(tmp_path):
    run = Run().set("train/loss", lambda s, v: 1.6 + 0.6 * math.exp(-s / 30))
    run.set("val/loss", lambda s, v: 1.62, kind="eval")
    assert set(run.findings(tmp_path)) == {"underfitting"}


def slow(run: Run) -> Run:
    """An LM run far from the prior, its loss creeping down by 0.5% per eval to the end."""
    run.set("train/loss", lambda s, v: 4.8 - 0.0005 * s).set("val/loss", lambda s, v: 4.8 - 0.0005 * s, kind="eval")
    run.summary.update(prior_loss=3.2, chance_loss=5.4, optimum_loss=None, best_val_accuracy=None)
    return run


def test_slow_progress_on_data_without_a_known_optimum(tmp_path):
    finding = slow(Run()).findings(tmp_path)["slow_progress"]
    assert "above 3.2" in finding.evidence and "raise optim.lr (now 0.001)" in finding.fix


def test_a_run_below_the_prior_or_no_longer_falling_is_not_slow(tmp_path):
    below = slow(Run())
    below.summary["prior_loss"] = 4.8  # the loss went past what predicting the frequencies gives
    assert "slow_progress" not in below.findings(tmp_path / "below")
    flat = slow(Run()).set("val/loss", [4.6, 4.55, 4.55, 4.56], kind="eval")
    assert "slow_progress" not in flat.findings(tmp_path / "flat")


def test_slow_progress_from_tiny_updates_explains_a_plateau_at_chance(tmp_path):
    """An LR 1000x too low: the loss never leaves chance; the updates say why, so that finding is raised
    to the symptom's severity and listed first."""
    run = Run().set("train/loss", lambda s, v: CHANCE).set("val/loss", lambda s, v: CHANCE, kind="eval")
    run.summary["best_val_accuracy"] = 0.1
    for name in LAYERS:
        run.set(f"update_ratio/{name}", lambda s, v: 1e-5)
    found = diagnose(load_run(run.write(tmp_path / "run")))
    assert [f.name for f in found] == ["slow_progress", "plateau_at_chance"]
    assert found[0].severity is Severity.CRITICAL and "1e-05" in found[0].evidence


def moving_slowly(ratio: float, val: list[float]) -> Run:
    """A batch-norm CNN 10x below its working LR: its loss leaves the prior behind and keeps falling."""
    run = Run().set("val/loss", val, kind="eval")
    run.summary["modules"] = ["BatchNorm2d", "Conv2d", "Linear", "ReLU"]
    for name in LAYERS:
        run.set(f"update_ratio/{name}", lambda s, v: ratio)
    return run


def test_slow_progress_when_the_loss_keeps_moving_on_tiny_updates(tmp_path):
    finding = moving_slowly(2e-4, [1.9, 1.2, 0.8, 0.55]).findings(tmp_path)["slow_progress"]
    assert "still held 19% of its whole fall" in finding.evidence and "normalisation layers" in finding.evidence


@pytest.mark.parametrize("ratio, val", [(2e-3, [1.9, 1.2, 0.8, 0.55]),  # healthy updates
                                        (2e-4, [1.9, 0.6, 0.56, 0.55]),  # converged: its last quarter barely moved
                                        (2e-4, [1.9, 1.2, 0.8, 0.81])])  # no longer falling
def test_small_updates_on_a_converged_or_healthy_run_are_not_slow(tmp_path, ratio, val):
    assert "slow_progress" not in moving_slowly(ratio, val).findings(tmp_path)


def unfinished(val: list[float], constant_lr: bool = True) -> Run:
    """Healthy-sized updates (1e-3, the Run's own), its val loss still falling at the end."""
    run = Run().set("val/loss", val, kind="eval")
    if constant_lr:
        run.config["schedule"] = {"name": "constant", "warmup": 0}
        run.set("train/lr", lambda s, v: 1e-3)
    return run


def test_slow_progress_when_the_loss_falls_as_fast_at_the_end_at_a_held_lr(tmp_path):
    """A budget spent early in the descent: the last quarter fell as fast as the one before."""
    finding = unfinished([1.9, 1.6, 1.3, 1.0]).findings(tmp_path)["slow_progress"]
    assert "1.00x as fast over the last quarter" in finding.evidence and "raise optim.lr" in finding.fix
    noisy = unfinished([1.9, 1.6, 1.3, 1.0])  # evaluated every 50 steps: a wobble, then a fall at the end
    noisy.evals = [{"step": s, "kind": "eval", "val/loss": v, "val/accuracy": 0.5}
                   for s, v in zip(range(50, 401, 50), [2.0, 1.95, 1.9, 1.9, 1.93, 1.95, 1.8, 1.75])]
    assert "slow_progress" not in noisy.findings(tmp_path / "noisy")  # the quarter before rose: noise, no pace


@pytest.mark.parametrize("val, constant_lr", [([1.9, 1.2, 0.8, 0.55], True),  # slowing: levelling out
                                              ([1.9, 1.6, 1.3, 1.0], False),  # a decaying LR speeds the end up
                                              ([1.9, 1.898, 1.896, 1.894], True)])  # a fall too small to judge
def test_a_descent_that_slows_or_ends_in_a_decaying_lr_is_not_unfinished(tmp_path, val, constant_lr):
    assert "slow_progress" not in unfinished(val, constant_lr).findings(tmp_path)


def test_a_pinned_clip_is_listed_before_the_slow_progress_it_causes(tmp_path):
    run = slow(Run()).set("grad/clip_rate", lambda s, v: 1.0)
    run.config["clip"] = 1e-3
    assert [f.name for f in diagnose(load_run(run.write(tmp_path / "run")))] == ["clip_pinned", "slow_progress"]


def test_a_blowup_is_judged_from_where_the_untrained_model_started(tmp_path):
    """A small model may start above ln K: 1.2x ln K is then its own first loss, not a blow-up."""
    run = Run().set("train/loss_max", lambda s, v: 1.2 * CHANCE if s == 10 else 1.0)
    run.train[0]["train/loss_first"] = 1.19 * CHANCE
    assert "diverging" not in run.findings(tmp_path / "small")
    run.train[0]["train/loss_first"] = 0.99 * CHANCE
    run.set("train/loss", lambda s, v: 1.05 * CHANCE).val_follows_train()
    # one batch at 1.2x in a run that never left 1.05x: the noise around its level, no blow-up
    assert "diverging" not in run.findings(tmp_path / "level")
    run.set("train/loss_max", lambda s, v: 1.5 * CHANCE if s == 10 else 1.1 * CHANCE)
    assert "1.5x chance ln K" in run.findings(tmp_path / "blowup")["diverging"].evidence


def test_a_cause_is_listed_before_the_symptom_it_explains(tmp_path):
    """A clip 1000x below the gradient norm under SGD: the loss stays at chance (critical); clip_pinned,
    a warning on its own, is why."""
    run = Run().set("train/loss", lambda s, v: CHANCE).set("val/loss", lambda s, v: CHANCE, kind="eval")
    run.summary["best_val_accuracy"] = 0.1
    run.config["clip"] = 1e-3
    run.set("grad/clip_rate", lambda s, v: 1.0)
    found = diagnose(load_run(run.write(tmp_path / "run")))
    assert [(f.name, f.severity) for f in found] == [("clip_pinned", Severity.CRITICAL),
                                                     ("plateau_at_chance", Severity.CRITICAL)]
    pinned_alone = Run().set("grad/clip_rate", lambda s, v: 1.0)
    pinned_alone.config["clip"] = 1e-3
    assert pinned_alone.findings(tmp_path / "alone")["clip_pinned"].severity is Severity.WARNING


def test_underfitting_needs_a_known_optimum(tmp_path):
    run = Run().set("train/loss", lambda s, v: 1.6 + 0.6 * math.exp(-s / 30))
    run.set("val/loss", lambda s, v: 1.62, kind="eval")
    run.summary["optimum_loss"] = None
    assert "underfitting" not in run.findings(tmp_path)


# ---------------------------------------------------------------------------- gradient rules
def test_clip_pinned(tmp_path):
    run = Run().set("grad/clip_rate", lambda s, v: 1.0).set("grad/norm_postclip", lambda s, v: 1e-4)
    run.config["clip"] = 1e-4
    finding = run.findings(tmp_path)["clip_pinned"]
    assert finding.severity is Severity.WARNING and "clip=0.0001" in finding.evidence


def test_clip_pinned_fix_looks_at_the_config_first(tmp_path):
    """accum_reduction=sum inflates every gradient: named before raising the clip; a clip near Adam's
    eps is not rescaled away, and the evidence says so instead of claiming it is."""
    run = Run().set("grad/clip_rate", lambda s, v: 1.0).set("grad/norm_postclip", lambda s, v: 1e-4)
    run.config.update(clip=1e-4, accum=4, accum_reduction="sum")
    run.config["optim"]["eps"] = 1e-8
    finding = run.findings(tmp_path)["clip_pinned"]
    assert finding.fix.startswith("accum_reduction=sum with accum=4") and "optim.eps" in finding.evidence
    run.config.update(clip=0.5, accum=1, accum_reduction="mean")
    run.set("grad/norm_preclip", lambda s, v: 10.0).set("grad/norm_postclip", lambda s, v: 0.5)
    finding = run.findings(tmp_path / "b")["clip_pinned"]
    assert finding.fix.startswith("raise clip") and "rescale it away" in finding.evidence


def test_clipping_every_step_by_a_little_is_not_pinned(tmp_path):
    """Norms 1.5x the threshold, clipped on every update: clipping works hard but the LR is intact."""
    run = Run().set("grad/norm_preclip", lambda s, v: 1.5).set("grad/clip_rate", lambda s, v: 1.0)
    assert "clip_pinned" not in run.findings(tmp_path)


def test_clip_never_reached(tmp_path):
    run = Run()
    run.config["clip"] = 100.0
    assert set(run.findings(tmp_path)) == {"clip_never_reached"}


def test_vanishing_gradients(tmp_path):
    run = Run()
    for depth, name in enumerate(("hidden.0.linear.weight", "hidden.1.linear.weight", "hidden.2.linear.weight")):
        run.set(f"grad_norm/{name}", lambda s, v, d=depth: 1e-7 * 1000**d)
    finding = run.findings(tmp_path)["vanishing_gradients"]
    assert "1e+06" in finding.evidence and "hidden.0.linear.weight" in finding.evidence
    assert "model.residual=true" in finding.fix


def test_vanishing_gradients_everywhere(tmp_path):
    """A plain deep stack whose forward signal died: every weight's gradient is ~1e-12, so the
    late/early ratio is ~1 and only the absolute level shows it."""
    run = Run()
    for name in LAYERS:
        run.set(f"grad_norm/{name}", lambda s, v: 1e-12 * (1 + s / 400))
    finding = run.findings(tmp_path)["vanishing_gradients"]
    assert finding.title == "no layer gets a usable gradient" and "1e-08" in finding.evidence


def test_a_solved_task_has_no_vanishing_gradients(tmp_path):
    """The loss fell to 1e-7 of its start: every gradient shrank with it, the first layer's to 0."""
    run = Run().set("train/loss", lambda s, v: 0.7 * 10 ** (-7 * s / 400))
    for depth, name in enumerate(LAYERS):
        run.set(f"grad_norm/{name}", lambda s, v, d=depth: 0.0 if d == 0 else 1e-7 * 10 ** d)
    assert "vanishing_gradients" not in run.findings(tmp_path)


def test_a_solved_task_has_no_exploding_gradients_and_its_dead_units_are_info(tmp_path):
    run = Run().set("train/loss", lambda s, v: 0.7 * 10 ** (-7 * s / 400))
    run.set("grad/norm_max", lambda s, v: 1e-2 if s == 300 else 1e-6).set("act_dead/hidden.1.act", lambda s, v: 0.7)
    run.config["clip"] = None
    found = run.findings(tmp_path)
    assert "exploding_gradients" not in found and found["dead_relu"].severity is Severity.INFO


def test_small_but_usable_gradients_are_not_vanishing(tmp_path):
    run = Run()
    for name in LAYERS:
        run.set(f"grad_norm/{name}", lambda s, v: 1e-5)
    assert "vanishing_gradients" not in run.findings(tmp_path)


def exploding(run: Run, burst: float) -> Run:
    rng = np.random.default_rng(1)
    return run.set("grad/norm_max", lambda s, v: burst if s in (250, 330) else 1.0 + 2 * rng.random())


def test_exploding_gradients_without_clipping(tmp_path):
    run = exploding(Run(), burst=60.0)
    run.config["clip"] = None
    run.summary["modules"] = ["Embedding", "Linear", "RNN"]
    finding = run.findings(tmp_path)["exploding_gradients"]
    assert "60 at step 250" in finding.evidence and "2 log window(s)" in finding.evidence
    assert "clip=1.0 (0.5-1.0 for recurrent models" in finding.fix


def test_gradients_that_shrink_with_their_loss_are_not_exploding(tmp_path):
    """Full-batch regression whose loss fell 1e4x: the early windows' norms are 40x the late ones'.
    Against the whole run's median that reads as a burst; against what came before it is none."""
    run = Run().set("grad/norm_max", lambda s, v: 0.2 * 40 ** (-s / 400))
    run.config["clip"] = None
    assert "exploding_gradients" not in run.findings(tmp_path)
    run.set("grad/norm_max", lambda s, v: 0.5 if s == 350 else 0.2 * 40 ** (-s / 400))  # 60x what came before
    assert "exploding_gradients" in run.findings(tmp_path / "burst")


def test_bursts_under_clipping_or_of_a_few_x_are_not_exploding(tmp_path):
    assert "exploding_gradients" not in exploding(Run(), burst=60.0).findings(tmp_path)  # clip=1.0 bounds them
    run = exploding(Run(), burst=6.0)
    run.config["clip"] = None
    assert "exploding_gradients" not in run.findings(tmp_path / "few")


def test_bn_eval_gap_is_told_apart_from_overfitting(tmp_path):
    """Val rises while train falls (which alone reads as overfitting), but the training samples
    fail in eval mode just as badly: the train/eval switch is the cause."""
    run = Run().set("train/loss", lambda s, v: 2.0 * math.exp(-s / 60))
    run.set("val/loss", [1.0, 1.6, 2.0, 2.2], kind="eval").set("val/loss_on_train", [0.9, 1.5, 2.0, 2.1], kind="eval")
    run.summary["modules"] = ["BatchNorm2d", "Conv2d", "Linear"]
    run.config["model"]["bn_momentum"] = 0.001
    findings = run.findings(tmp_path)
    assert "overfitting" not in findings
    finding = findings["bn_eval_gap"]
    assert "eval-mode loss 2.1" in finding.evidence and "model.bn_momentum (now 0.001)" in finding.fix


def test_overfitting_with_batch_norm_stays_overfitting(tmp_path):
    run = Run().set("train/loss", lambda s, v: 2.0 * math.exp(-s / 60))
    run.set("val/loss", [1.0, 1.1, 1.3, 1.5], kind="eval")
    run.set("val/loss_on_train", lambda s, v: 2.0 * math.exp(-s / 60), kind="eval")
    assert set(run.findings(tmp_path)) == {"overfitting"}


def with_epochs(run: Run, steps_per_epoch: int, jump: float) -> Run:
    """Epochs of `steps_per_epoch` updates; the loss is `jump`x higher in each epoch's first window."""
    run.set("train/epoch", lambda s, v: s / steps_per_epoch)
    return run.set("train/loss", lambda s, v: v * jump if s % steps_per_epoch == 10 and s > steps_per_epoch else v)


def test_epoch_boundary_jumps(tmp_path):
    run = with_epochs(Run(), 50, jump=3.0)
    run.config["data"] = {"shuffle": False}
    finding = run.findings(tmp_path)["epoch_boundary_jumps"]
    assert "at 7 of 7 epoch starts" in finding.evidence and "set data.shuffle=true" in finding.fix


@pytest.mark.parametrize("amplitude, flagged", [(3.0, True), (0.2, False)])
def test_a_loss_that_rises_and_falls_with_the_epoch_is_named_without_a_jump_at_its_start(tmp_path, amplitude,
                                                                                       flagged):
    """Data sorted by a continuous target: the loss falls through each 50-step epoch's first half
    and climbs through its second (a smooth cycle, no jump at the start), on a falling trend."""
    rng = np.random.default_rng(2)
    run = Run().set("train/epoch", lambda s, v: s / 50)
    run.set("train/loss", lambda s, v: v * math.exp(amplitude * abs((s % 50) - 25) / 25 + rng.normal(0, 0.05)))
    run.config["data"] = {"shuffle": False}
    found = run.findings(tmp_path)
    assert ("epoch_boundary_jumps" in found) is flagged
    if flagged:
        assert "position in every epoch" in found["epoch_boundary_jumps"].title
        assert "set data.shuffle=true" in found["epoch_boundary_jumps"].fix


def test_epochs_without_jumps_or_with_every_window_at_a_start_are_not_judged(tmp_path):
    assert "epoch_boundary_jumps" not in with_epochs(Run(), 50, jump=1.0).findings(tmp_path / "flat")
    rng = np.random.default_rng(2)
    short = Run().set("train/loss", lambda s, v: v * (1 + 0.5 * rng.random())).set("train/epoch", lambda s, v: s / 10)
    assert "epoch_boundary_jumps" not in short.findings(tmp_path / "short")


def test_vanishing_gradients_needs_numbered_blocks(tmp_path):
    """Only tensors of repeated, numbered blocks are compared: a small first layer alone is not vanishing."""
    run = Run().set("grad_norm/stem.0.weight", lambda s, v: 1e-7)
    assert "vanishing_gradients" not in run.findings(tmp_path)


def test_dead_relu_from_dead_unit_fractions(tmp_path):
    run = Run().set("act_dead/hidden.1.act", lambda s, v: 0.97 if s > 100 else 0.1)
    finding = run.findings(tmp_path)["dead_relu"]
    assert "hidden.1.act 97%" in finding.evidence and "hidden.0.act" not in finding.evidence


def test_dead_relu_from_zero_gradients_without_activation_monitors(tmp_path):
    run = Run()
    for row in run.train:
        for key in [k for k in row if k.startswith("act_dead/")]:
            del row[key]
    for name in ("hidden.0.linear.weight", "hidden.1.linear.weight"):
        run.set(f"grad_norm/{name}", lambda s, v: 0.0 if s > 100 else v)
    assert "2 weight tensor(s)" in run.findings(tmp_path)["dead_relu"].evidence


@pytest.mark.parametrize("dead,severity", [(0.95, Severity.CRITICAL), (0.7, Severity.WARNING), (0.2, None)])
def test_dead_relu_from_zero_gradient_units(tmp_path, dead, severity):
    """Without activation hooks, monitor=basic's grad_dead: critical once a layer passes almost no signal.
    Judged on a run that did not learn clearly (its val loss ended at 90% of chance)."""
    run = Run().set("val/loss", lambda s, v: 0.9 * CHANCE, kind="eval")
    for row in run.train:
        for key in [k for k in row if k.startswith("act_dead/")]:
            del row[key]
        row["grad_dead/hidden.1.linear"] = dead
        row["grad_dead/hidden.0.linear"] = 0.05
    found = run.findings(tmp_path).get("dead_relu")
    assert (found.severity if found else None) is severity
    if found:
        assert f"hidden.1.linear {dead:.0%}" in found.evidence and "hidden.0.linear" not in found.evidence
    run.config["model"]["activation"] = "gelu"  # judged by effect: a flat unit is dead whatever flattened it
    on_gelu = run.findings(tmp_path / "gelu").get("dead_relu")
    assert (on_gelu.severity if on_gelu else None) is severity
    if on_gelu:
        assert "no ReLU module" in on_gelu.evidence and "saturat" in on_gelu.title
    run.set("val/loss", lambda s, v: 0.5 * CHANCE, kind="eval")  # it learned: lost capacity is no warning
    learned = run.findings(tmp_path / "learned").get("dead_relu")
    assert (learned.severity if learned else None) is (Severity.INFO if severity else None)


def test_dead_units_behind_a_functional_relu_are_named(tmp_path):
    """A user model calling torch.relu in its forward has no ReLU module: grad_dead still tells."""
    run = Run().set("val/loss", lambda s, v: 0.9 * CHANCE, kind="eval")
    run.config["model"] = {"_target_": "mypkg.Net"}
    run.summary["modules"] = ["Linear", "Net"]
    for row in run.train:
        for key in [k for k in row if k.startswith("act_dead/")]:
            del row[key]
        for layer in ("fc1", "fc2", "fc3", "fc4"):
            row[f"grad_dead/{layer}"] = 1.0 if row["step"] > 60 else 0.0
    found = run.findings(tmp_path)["dead_relu"]
    assert found.severity is Severity.CRITICAL and "fc1 100%" in found.evidence and "torch.relu" in found.evidence


def test_dead_relu_is_judged_on_any_model_with_relu_modules(tmp_path):
    """A user's model (config says nothing about activations) whose module types include ReLU."""
    run = Run()
    run.config["model"] = {"_target_": "mypkg.Net"}
    run.summary["modules"] = ["Linear", "Net", "ReLU", "Sequential"]
    for row in run.train:
        for key in [k for k in row if k.startswith("act_dead/")]:
            del row[key]
    run.set("grad_norm/hidden.1.linear.weight", lambda s, v: 0.0 if s > 100 else v)
    assert "1 weight tensor(s)" in run.findings(tmp_path)["dead_relu"].evidence
    run.summary["modules"] = ["GELU", "Linear", "Net", "Sequential"]  # zero gradients there: something else
    assert "dead_relu" not in run.findings(tmp_path / "gelu")


def test_weight_norm_runaway(tmp_path):
    run = Run().set("param/norm_total", lambda s, v: 20 * math.exp(s / 150))
    run.set("train/loss", lambda s, v: 0.9 + 0.2 * math.exp(-s / 60))  # flat over the second half
    finding = run.findings(tmp_path)["weight_norm_runaway"]
    assert finding.severity is Severity.WARNING and "bought no progress" in finding.evidence


def test_weights_growing_while_the_loss_still_falls_are_info(tmp_path):
    """A sigmoid output on separable data grows its margin: the loss pays for the growth."""
    run = Run().set("param/norm_total", lambda s, v: 20 * math.exp(s / 150))
    run.set("train/loss", lambda s, v: 0.5 * math.exp(-s / 150))
    assert run.findings(tmp_path)["weight_norm_runaway"].severity is Severity.INFO


# ---------------------------------------------------------------------------- numerics and guard events
def fp16(run: Run, loss_scaling: bool) -> Run:
    run.config["precision"] = {"name": "fp16", "init_scale": 65536.0, "growth_interval": 2000,
                               "loss_scaling": loss_scaling}
    return run


def test_fp16_underflow(tmp_path):
    run = fp16(Run(), loss_scaling=False)
    run.set("grad_norm/stem.0.weight", lambda s, v: 0.0).set("grad_norm/hidden.0.linear.weight", lambda s, v: 0.0)
    found = run.findings(tmp_path)
    assert "stem.0.weight" in found["fp16_underflow"].evidence
    assert "dead_relu" not in found  # zeros under fp16 without a scaler are underflow, not dead units


def test_zero_gradients_with_a_loss_scaler_are_not_underflow(tmp_path):
    run = fp16(Run(), loss_scaling=True).set("grad_norm/stem.0.weight", lambda s, v: 0.0)
    assert "fp16_underflow" not in run.findings(tmp_path)


@pytest.mark.parametrize("overflows,flagged", [(18, False), (60, True)])
def test_fp16_overflow_skips(tmp_path, overflows, flagged):
    """init_scale 2^16 costs up to 16 overflows while the scale calibrates; 60 of 400 is a real problem."""
    run = fp16(Run(), loss_scaling=True)
    run.summary["overflow_steps"] = overflows
    run.set("train/loss_scale", lambda s, v: 2.0 ** max(16 - s // 10, 0))
    assert ("fp16_overflow_skips" in run.findings(tmp_path)) is flagged


def test_guard_events(tmp_path):
    run = Run()
    run.summary["events"] = [
        {"step": 50, "kind": "skip_nonfinite", "message": "step 50: non-finite loss or gradients, update skipped"},
        {"step": 90, "kind": "skip_spike", "message": "step 90: loss spike, update skipped"},
        {"step": 95, "kind": "rollback", "message": "step 95: 4 bad updates within 50 steps; rolled back to step 0"},
    ]
    found = run.findings(tmp_path)
    assert set(found) == {"nonfinite_skips", "loss_spikes", "rollbacks"}
    assert "step(s) 50" in found["nonfinite_skips"].evidence and "rolled back" in found["rollbacks"].evidence


def test_outlier_samples_are_named_and_the_fix_is_the_data(tmp_path):
    run = Run()
    sample = {"index": 17, "loss": 3.2e4, "input_norm": 5.6e3}
    run.summary["events"] = [
        {"step": s, "kind": "skip_spike", "message": f"step {s}: loss spike", "data_cause": True, "samples": [sample]}
        for s in (40, 120, 260)] + [{"step": 300, "kind": "skip_spike", "message": "x", "data_cause": False,
                                     "samples": [{"index": 3, "loss": 2.5, "input_norm": 5.0}]}]
    found = run.findings(tmp_path)
    outliers = found["outlier_samples"]
    assert outliers.severity is Severity.CRITICAL and "3 of 4 skipped" in outliers.evidence
    assert "#17 (loss 3.2e+04, input norm 5.6e+03)" in outliers.evidence and "optim.lr" not in outliers.fix
    assert "outlier_samples names them" in found["loss_spikes"].fix
    run.summary["events"] = [{**e, "data_cause": False} for e in run.summary["events"]]  # the model's fault
    found = run.findings(tmp_path / "b")
    assert "outlier_samples" not in found and "optim.lr" in found["loss_spikes"].fix


def test_schedule_ended_early(tmp_path):
    run = Run().set("train/lr", lambda s, v: 1e-3 * max(0.0, 1 - s / 200) + 1e-5)
    evidence = run.findings(tmp_path)["schedule_ended_early"].evidence
    assert "at step 200" in evidence and "last 50%" in evidence


def test_a_schedule_still_decaying_is_not_judged_on_the_steps_it_has_yet_to_take(tmp_path):
    """Live, halfway through a decay that ends at the last step: the lowest LR so far is the
    current one, not the floor. The same rows with the LR at its floor since step 100 are."""
    def halfway(lr) -> Run:
        run = Run().set("train/lr", lr)
        run.train = [r for r in run.train if r["step"] <= 200]
        run.evals = [r for r in run.evals if r["step"] <= 200]
        run.summary.update(status="running", steps=200)
        return run

    assert "schedule_ended_early" not in halfway(lambda s, v: 1e-3 * (1 - s / 400) + 1e-5).findings(tmp_path / "a")
    evidence = halfway(lambda s, v: 1e-3 * max(0.0, 1 - s / 100) + 1e-5).findings(tmp_path / "b")[
        "schedule_ended_early"].evidence
    assert "at step 100" in evidence and "last 25%" in evidence


def test_unused_parameters(tmp_path):
    run = Run().set("grad/tensors_without_grad", lambda s, v: 2.0)
    assert run.findings(tmp_path)["unused_parameters"].evidence.startswith("2 trainable tensor(s)")
    early = Run().set("grad/tensors_without_grad", lambda s, v: 2.0 if s < 200 else 0.0)  # a module switched on late
    assert "unused_parameters" not in early.findings(tmp_path / "b")


# ---------------------------------------------------------------------------- the catalogue's setup mistakes
def test_warmup_too_long(tmp_path):
    run = Run()
    run.config["schedule"]["warmup"] = 300
    run.set("train/loss", lambda s, v: 2.3 - 0.1 * (s / 150) ** 3 if s <= 300 else 1.5 - 0.001 * (s - 300))
    finding = run.findings(tmp_path)["warmup_too_long"]
    assert "over 300 of 400 steps (75%)" in finding.evidence and "schedule.warmup (now 300)" in finding.fix
    short = Run()
    short.config["schedule"]["warmup"] = 80  # 20% of the run: within what the field uses
    short.set("train/loss", lambda s, v: 2.3 - 0.1 * (s / 40) ** 3 if s <= 80 else 1.5 - 0.001 * (s - 80))
    assert "warmup_too_long" not in short.findings(tmp_path / "b")


def test_a_long_warmup_whose_loss_fell_evenly_to_its_end_is_flagged(tmp_path):
    """A language model's first drop is fast at any LR, so no acceleration shows; but its loss
    kept falling as fast right up to the LR's peak."""
    run = Run().set("train/loss", lambda s, v: 5.4 - 0.007 * min(s, 320) - 0.0005 * max(s - 320, 0))
    run.config["schedule"]["warmup"] = 320
    assert "warmup_too_long" in run.findings(tmp_path)


def test_a_long_warmup_that_did_not_hold_the_run_back_is_only_said_when_it_takes_most_of_the_run(tmp_path):
    run = Run().set("train/loss", lambda s, v: 0.5 + 1.8 * math.exp(-s / 60))  # it fell fastest first
    run.config["schedule"]["warmup"] = 180  # 45%
    assert "warmup_too_long" not in run.findings(tmp_path / "a")
    run.config["schedule"]["warmup"] = 360  # 90%: no harm shown, but the run hardly trained at its peak LR
    finding = run.findings(tmp_path / "b")["warmup_too_long"]
    assert finding.severity is Severity.INFO and "360 of 400 steps (90%)" in finding.evidence


def test_a_long_warmup_whose_loss_fell_faster_in_its_second_half_is_flagged(tmp_path):
    """A curve at a fixed LR is convex; 0.7 then 0.9 nats over the warmup's halves waited for the LR."""
    run = Run().set("train/loss", lambda s, v: 2.3 - 0.7 * s / 180 if s <= 180 else
                    (1.6 - 0.9 * (s - 180) / 180 if s <= 360 else 0.7))
    run.config["schedule"]["warmup"] = 360
    assert run.findings(tmp_path)["warmup_too_long"].severity is Severity.WARNING


def shrinking(run: Run, factor: float) -> Run:
    return run.set("param_norm/stem.0.weight", lambda s, v: 5.0 * factor ** (s / 400)).set(
        "param_norm/head.weight", lambda s, v: 5.0 * factor ** (s / 400))


@pytest.mark.parametrize("wd, factor, loss_end, flagged", [
    (30.0, 0.05, 2.25, True),  # decayed to nothing, back at chance
    (0.1, 0.05, 2.25, False),  # the weights shrank, but decay cannot explain it
    (30.0, 0.9, 2.25, False),  # strong decay, yet the weights held
    (30.0, 0.05, None, False),  # shrank, but the loss kept falling: no harm done
])
def test_weight_decay_collapse(tmp_path, wd, factor, loss_end, flagged):
    run = shrinking(Run(), factor)
    for name in LAYERS[1:-1]:
        run.set(f"param_norm/{name}", lambda s, v: 0.5 * factor ** (s / 400))
    run.config["optim"]["weight_decay"] = wd
    if loss_end is not None:
        run.set("train/loss", lambda s, v: 2.3 - 0.3 * math.sin(math.pi * s / 400))
    findings = run.findings(tmp_path)
    assert ("weight_decay_collapse" in findings) is flagged
    if flagged:
        assert findings["weight_decay_collapse"].severity is Severity.CRITICAL
        assert "optim.weight_decay=30" in findings["weight_decay_collapse"].evidence


@pytest.mark.parametrize("target, flagged", [("torch.optim.Adam", True), ("torch.optim.AdamW", False)])
def test_weight_decay_collapse_under_coupled_l2(tmp_path, target, flagged):
    """Adam's weight_decay is L2 in the gradient: exp(-sum lr * wd) = 0.82 says decay cannot explain
    the shrink, yet wd * |w| outweighs the loss gradient 50x and Adam's scaling turns that into a
    step of ~lr towards 0 per update. Decoupled (AdamW) decay at the same numbers could not."""
    run = shrinking(Run(), 0.05)
    for name in LAYERS[1:-1]:
        run.set(f"param_norm/{name}", lambda s, v: 0.5 * 0.05 ** (s / 400))
    for name in LAYERS:
        run.set(f"grad_norm/{name}", lambda s, v: 1e-4)
    run.config["optim"].update({"weight_decay": 0.5, "_target_": target})
    run.set("train/loss", lambda s, v: 2.3 - 0.3 * math.sin(math.pi * s / 400))
    found = run.findings(tmp_path)
    assert ("weight_decay_collapse" in found) is flagged
    if flagged:
        assert "before Adam's scaling (coupled)" in found["weight_decay_collapse"].evidence
        assert "optim=adamw" in found["weight_decay_collapse"].fix


def test_weight_decay_collapse_behind_an_embedding_kept_out_of_decay(tmp_path):
    """A large tensor outside decay holds most of the total norm, which barely moves, while every
    decayed tensor goes to zero: judged per tensor, not by the total."""
    run = shrinking(Run(), 0.05).set("param_norm/stem.0.weight", lambda s, v: 60.0)
    for name in LAYERS[1:-1]:
        run.set(f"param_norm/{name}", lambda s, v: 0.5 * 0.05 ** (s / 400))
    run.config["optim"]["weight_decay"] = 30.0
    run.set("train/loss", lambda s, v: 2.3 - 0.3 * math.sin(math.pi * s / 400))
    assert "4 of 5 weight tensors" in run.findings(tmp_path)["weight_decay_collapse"].evidence


def entropy_run(end_share: float) -> Run:
    run = Run()
    for head in range(4):
        run.set(f"attn_entropy/layer0/head{head}", lambda s, v: 2.5 * (1 - (1 - end_share) * s / 400))
    return run


def test_attention_entropy_collapse(tmp_path):
    run = entropy_run(0.1)
    run.config["model"]["qk_norm"] = False
    finding = run.findings(tmp_path)["attention_entropy_collapse"]
    assert "2.44 nats at step 10, 0.306 at the end (13%" in finding.evidence and "model.qk_norm=true" in finding.fix
    assert "attention_entropy_collapse" not in entropy_run(0.8).findings(tmp_path / "b")  # heads specialise


def test_frozen_parameters_and_their_opt_out(tmp_path):
    run = Run()
    run.summary["parameters"] = {"trainable": 650, "frozen": 9000, "frozen_modules": ["layers.0", "layers.2"]}
    finding = run.findings(tmp_path)["frozen_parameters"]
    assert "9,000 of 9,650" in finding.evidence and "layers.0, layers.2" in finding.evidence
    run.config["diagnose"] = {"ignore": ["frozen_parameters"]}
    assert "frozen_parameters" not in run.findings(tmp_path / "b")
    run.summary["parameters"] = {"trainable": 9000, "frozen": 650, "frozen_modules": ["embed"]}  # a frozen embedding
    run.config["diagnose"] = {}
    assert "frozen_parameters" not in run.findings(tmp_path / "c")


@pytest.mark.parametrize("found, share, severity", [(256, 1.0, Severity.CRITICAL), (40, 0.2, Severity.WARNING),
                                                    (1, 0.1, None), (10, 0.01, None)])
def test_val_train_overlap(tmp_path, found, share, severity):
    run = Run()
    run.summary["split_overlap"] = {"val_checked": 256, "val_in_train": found, "train_hashed": 512,
                                    "train_samples": 512, "share": share}
    findings = run.findings(tmp_path)
    assert (findings["val_train_overlap"].severity if "val_train_overlap" in findings else None) is severity


@pytest.mark.parametrize("hidden", [True, False])
def test_forward_overflow_names_the_module_and_leads_with_the_activation(tmp_path, hidden):
    """A module that returned Inf on finite inputs before any update: the cause of the non-finite
    loss beside it, repaired at the activation (when it is a hidden one), then the init, then the LR."""
    run = Run().set("train/loss", lambda s, v: math.nan if s >= 10 else v)
    run.summary.update(status="diverged", hidden_activations=["act"] if hidden else [],
                       forward={"nonfinite": {"module": "act", "type": "Exp", "input_max": 132.0}})
    findings = run.findings(tmp_path)
    found = findings["forward_overflow"]
    assert list(findings)[0] == "forward_overflow" and found.severity is Severity.CRITICAL
    assert "`act` (Exp)" in found.evidence and "132" in found.evidence and "diverging" in findings
    kinds = [r.kind for r in found.remedies]
    assert kinds[:2] == (["activation", "init"] if hidden else ["init", "lr_down"])[:2]
    assert kinds.index("init") < min(i for i, k in enumerate(kinds) if k.startswith("lr"))


def test_a_constant_output_without_a_gradient_is_named_at_the_output(tmp_path):
    run = Run()
    run.summary.update(output_activation={"module": "head.1", "type": "Softmax", "low": 0.0, "high": 1.0,
                                          "single_unit_softmax": True, "read_by_loss": True, "units": 1,
                                          "values_per_sample": 1, "output_units": 1},
                       forward={"gradient_norm": 0.0, "constant_output": {
                           "module": "head.1", "type": "Softmax", "after": "head.0", "after_type": "Linear", "value": 1.0}})
    found = run.findings(tmp_path)["output_activation"]
    assert "`head.1` (Softmax)" in found.evidence and "`head.0` (Linear)" in found.evidence
    assert found.remedy.overrides == ("output_activation=identity",) and found.remedy.any_objective
    run.summary["forward"]["gradient_norm"] = 0.5  # the output is constant but learns: a model blind to its inputs
    run.summary["output_activation"].update(type="Identity", low=None, high=None, single_unit_softmax=False)
    assert "output_activation" not in run.findings(tmp_path / "learns")


@pytest.mark.parametrize("contrast, evidence", [
    ({"train_classes": 1, "train_class_values": [0], "val_classes": 10, "val_share_unseen": 0.9}, "class 0"),
    ({"train_classes": 8, "val_classes": 10, "val_share_unseen": 0.2}, "20% of the sampled validation labels"),
    ({"train_target_spread": 0.0}, "the same value"),
    ({"val_over_train_input_norm": 255.0}, "255x"),
    ({"train_classes": 10, "val_classes": 10, "val_share_unseen": 0.03, "val_over_train_input_norm": 1.4}, None),
])
def test_split_mismatch(tmp_path, contrast, evidence):
    """A mark that only preprocessing applied to one split leaves: critical, with no remedy (the fix
    is in the user's data code); a rare class missing from training or train-only augmentation is not one."""
    run = Run()
    run.summary["split_contrast"] = contrast
    findings = run.findings(tmp_path)
    if evidence is None:
        assert "split_mismatch" not in findings
    else:
        found = findings["split_mismatch"]
        assert found.severity is Severity.CRITICAL and evidence in found.evidence and not found.remedies


@pytest.mark.parametrize("scale, first_loss, severity", [(170.0, 450.0, Severity.WARNING), (170.0, 2.31, Severity.INFO),
                                                         (1.2, 450.0, None)])
def test_unnormalised_inputs(tmp_path, scale, first_loss, severity):
    """A warning when the scale blew up the first loss; an info when the model absorbed it (or, below,
    learned clearly all the same)."""
    run = Run().set("train/loss_first", lambda s, v: first_loss if s == 10 else v)
    run.set("val/loss", lambda s, v: 0.9 * CHANCE, kind="eval")
    run.summary["input_stats"] = {"max_abs_feature_median": scale, "max_feature_spread": 80.0 if scale > 10 else 1.0,
                                  "rms": scale / 2}
    findings = run.findings(tmp_path)
    assert (findings["unnormalised_inputs"].severity if "unnormalised_inputs" in findings else None) is severity
    if severity:
        assert "|median| 170" in findings["unnormalised_inputs"].evidence
        # its remedy comes at any severity: an info beside a divergence it explains is raised and acted on
        assert findings["unnormalised_inputs"].remedy.overrides == ("data.standardize=true",)
    run.set("val/loss", lambda s, v: 0.5 * CHANCE, kind="eval")
    learned = run.findings(tmp_path / "learned").get("unnormalised_inputs")
    assert (learned.severity if learned else None) is (Severity.INFO if severity else None)


@pytest.mark.parametrize("best_over_start, severity", [(0.995, Severity.CRITICAL), (0.9, Severity.WARNING)])
def test_unnormalised_inputs_that_hurt_are_critical_until_the_run_gets_clearly_below_its_start(
        tmp_path, best_over_start, severity):
    """Half a percent below where an untrained model starts is no recovery (a regressor on raw
    columns in the thousands whose units all died ends at its targets' mean)."""
    run = Run().set("train/loss_first", lambda s, v: 450.0 if s == 10 else v)
    run.summary["input_stats"] = {"max_abs_feature_median": 170.0, "max_feature_spread": 80.0, "rms": 85.0}
    run.summary["best_val_loss"] = best_over_start * run.summary["chance_loss"]
    run.set("val/loss", lambda s, v: best_over_start * CHANCE, kind="eval")
    assert run.findings(tmp_path)["unnormalised_inputs"].severity is severity


PRICES = [float(v) for v in np.percentile(np.random.default_rng(0).normal(2e5, 5e4, 4096), np.arange(101))]
STANDARD = [float(v) for v in np.percentile(np.random.default_rng(0).normal(0.0, 1.0, 4096), np.arange(101))]


@pytest.mark.parametrize("targets, best_over_prior, severity", [
    (PRICES, 0.99, Severity.CRITICAL),  # never beat predicting the mean: the scale is the plain cause
    (PRICES, float("nan"), Severity.CRITICAL),  # no finite val loss
    (PRICES, 0.3, Severity.INFO),  # fitted them anyway: a fact, raised only by a symptom it explains
    (STANDARD, 0.99, None)])
def test_unscaled_targets(tmp_path, targets, best_over_prior, severity):
    run = Run()
    run.summary.update(task="regression", loss_function="mse", chance_loss=None, prior_loss=2.5e9,
                       val_prior_loss=2.5e9, best_val_loss=best_over_prior * 2.5e9, best_val_accuracy=None,
                       target_percentiles=targets)
    findings = run.findings(tmp_path)
    assert (findings["unscaled_targets"].severity if "unscaled_targets" in findings else None) is severity
    if severity:
        assert "median 1.98e+05 and robust std 5.01e+04" in findings["unscaled_targets"].evidence
        assert findings["unscaled_targets"].remedy.overrides == ("data.standardize_targets=true",)
        run.summary["input_stats"] = {"max_abs_feature_median": 5e3, "max_feature_spread": 4e3, "rms": 6e3}
        both = run.findings(tmp_path / "raw_inputs")["unscaled_targets"].remedy  # X and y scaled together
        assert both.overrides == ("data.standardize_targets=true", "data.standardize=true") and both.kind == "targets"
        run.summary["loss_function"] = "bce"  # probabilities: never scaled
        assert "unscaled_targets" not in run.findings(tmp_path / "bce")


@pytest.mark.parametrize("steps, severity", [(60, Severity.INFO), (300, Severity.CRITICAL)])
def test_live_unscaled_targets_say_never_only_from_half_the_run_on(tmp_path, steps, severity):
    """An output layer growing towards prices can spend its first evals above their prior and still
    fit them: a live eval at step 60 of 600 cannot say the run never learned; at 300 it can."""
    run = Run()
    run.summary.update(task="regression", loss_function="mse", chance_loss=None, prior_loss=2.5e9,
                       val_prior_loss=2.5e9, best_val_loss=4e10, best_val_accuracy=None, target_percentiles=PRICES,
                       status="running", steps=steps, max_steps=600)
    assert run.findings(tmp_path)["unscaled_targets"].severity is severity


def test_a_run_the_guard_stopped_before_any_logged_update_is_diverging(tmp_path):
    """Every update skipped from the start, then the stop: no train loss was ever logged."""
    run = Run()
    run.train, run.evals = [], []
    run.summary.update(status="diverged", reason="step 25: bad updates kept coming after 3 rollback(s)", steps=25)
    finding = run.findings(tmp_path)["diverging"]
    assert finding.severity is Severity.CRITICAL and "no update's loss was logged" in finding.evidence


@pytest.mark.parametrize("data_cause", [False, True])
def test_a_data_cause_is_listed_before_the_divergence_it_explains(tmp_path, data_cause):
    run = Run().set("train/loss", lambda s, v: 2.3 * (1 + s / 100)).val_follows_train()
    run.set("train/loss_first", lambda s, v: 450.0 if s == 10 else v)
    if data_cause:
        run.summary["input_stats"] = {"max_abs_feature_median": 170.0, "max_feature_spread": 80.0, "rms": 85.0}
    found = diagnose(load_run(run.write(tmp_path / "run")))
    names = [f.name for f in found]
    if data_cause:
        assert names[0] == "unnormalised_inputs" and found[0].severity is Severity.CRITICAL
        assert names.index("diverging") > names.index("unnormalised_inputs")
    else:
        assert names[0] == "diverging" and "unnormalised_inputs" not in names


def test_an_output_that_cannot_express_the_answer_leads_the_divergence_it_explains(tmp_path):
    """A model that normalises ReLU class scores itself (0/0 = NaN once they are all 0): the output
    activation is the cause, raised to the divergence's severity and listed before it."""
    run = Run().set("train/loss", lambda s, v: 2.3 * (1 + s / 100)).val_follows_train()
    run.summary["output_activation"] = {"module": "out", "type": "ReLU", "low": 0.0, "high": None,
                                        "single_unit_softmax": False, "read_by_loss": False, "units": 10,
                                        "output_units": 10}
    found = diagnose(load_run(run.write(tmp_path / "run")))
    assert [f.name for f in found][:2] == ["output_activation", "diverging"]
    assert found[0].severity is Severity.CRITICAL and found[0].remedy.overrides == ("output_activation=softmax",)


def test_diagnose_ignore_names_only_known_rules():
    from harness.diagnosis.live import validate_diagnose_config
    from harness.core.errors import ConfigError
    validate_diagnose_config(OmegaConf.create({"ignore": ["frozen_parameters"]}))
    with pytest.raises(ConfigError, match="diagnose.ignore='frozen_paramters' is invalid"):
        validate_diagnose_config(OmegaConf.create({"ignore": ["frozen_paramters"]}))


def test_every_rule_is_exercised_by_this_file():
    names = {rule.__name__ for rule in RULES}
    source = Path(__file__).read_text()
    assert names == {name for name in names if f'"{name}"' in source}


# ---------------------------------------------------------------------------- loading and the report
def test_run_without_config_or_summary_is_still_diagnosed(tmp_path):
    run_dir = Run().set("train/loss", lambda s, v: float("nan") if s > 200 else v).write(tmp_path / "run")
    (run_dir / "config.yaml").unlink()
    (run_dir / "summary.json").unlink()
    assert [f.name for f in write_report(run_dir)] == ["diverging"]
    assert "unknown (no summary.json)" in (run_dir / "report.md").read_text()


def test_run_that_logged_nothing_gets_an_empty_report(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    assert write_report(tmp_path) == []
    assert "No pathology found" in (tmp_path / "report.md").read_text()
    assert not list((tmp_path / "plots").glob("*.png"))


def test_missing_metrics_is_an_error(tmp_path):
    with pytest.raises(MissingMetricsError):
        write_report(tmp_path)


def test_report_lists_findings_and_plots(tmp_path):
    run = Run().set("train/loss", bumps)
    run.config["clip"] = 100.0
    run_dir = run.write(tmp_path / "run")
    findings = write_report(run_dir)
    report = (run_dir / "report.md").read_text()
    for finding in findings:
        assert f"`{finding.name}`" in report and finding.evidence in report and finding.fix in report
    plots = sorted(p.name for p in (run_dir / "plots").glob("*.png"))
    assert plots == sorted(["loss.png", "lr.png", "grad_norm.png", "layer_grad_norms.png", "block_grad_ratio.png",
                            "update_ratio.png", "param_norm.png", "dead_units.png"])
    for name in plots:
        assert f"](plots/{name})" in report


def test_report_without_monitors_has_only_the_global_plots(tmp_path):
    run = Run()
    for row in run.train:
        for key in [k for k in row if "/" in k and k.split("/")[0] in ("grad_norm", "param_norm", "update_ratio",
                                                                      "param", "act_dead")]:
            del row[key]
    run_dir = run.write(tmp_path / "run")
    assert write_report(run_dir) == []
    assert sorted(p.name for p in (run_dir / "plots").glob("*.png")) == ["grad_norm.png", "loss.png", "lr.png"]
    assert "No pathology found" in (run_dir / "report.md").read_text()


# ---------------------------------------------------------------------------- scripts/diagnose.py
def diagnose_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "diagnose.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_on_a_diverged_run_with_nan_losses(tmp_path):
    run = Run().set("train/loss", lambda s, v: v if s < 120 else (1e4 if s == 120 else float("nan")))
    run.train = [r for r in run.train if r["step"] <= 130]
    run.evals = [r for r in run.evals if r["step"] <= 100]
    run.summary.update(status="diverged", steps=130, reason="step 130: training loss is nan; stopping",
                       events=[{"step": 130, "kind": "diverged", "message": "step 130: training loss is nan"}])
    run_dir = run.write(tmp_path / "run")
    result = diagnose_cli(str(run_dir))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("diverging [critical]: ")
    assert f"report: {run_dir / 'report.md'}" in result.stdout
    assert (run_dir / "report.md").is_file() and (run_dir / "plots" / "loss.png").stat().st_size > 0


def test_cli_without_metrics_is_a_one_line_error(tmp_path):
    result = diagnose_cli(str(tmp_path))
    assert result.returncode == 2
    expected = f"error: RUN_DIR='{tmp_path}' is invalid: a training run directory holding metrics.jsonl"
    assert result.stderr.strip() == expected
    assert not (tmp_path / "report.md").exists()


def test_output_directions_count_what_the_logits_can_span():
    from harness.models.probe import output_directions

    g = torch.Generator().manual_seed(0)
    through_two = torch.randn(256, 2, generator=g) @ torch.randn(2, 20, generator=g) + 3.0
    assert output_directions(through_two)["directions"] == 2
    assert output_directions(torch.randn(256, 20, generator=g))["directions"] >= 17
    assert output_directions(torch.full((64, 10), 2.5)) is None  # a dead model's output does not vary
    assert output_directions(torch.full((64, 10), math.nan)) is None  # a diverged one's is not finite


@pytest.mark.parametrize("directions, val_end, flagged", [(2, 1.8, True), (8, 1.8, False), (2, 0.1, False)])
def test_capacity_limit_from_the_directions_the_logits_span(tmp_path, directions, val_end, flagged):
    run = Run().set("val/loss", lambda s, v: val_end + 0.01 * (400 - s) / 300, kind="eval")
    run.summary["output_directions"] = {"directions": directions, "classes": 10, "samples": 256,
                                        "spectrum": [1.0, 0.6, 0.01, 0.0]}
    found = run.findings(tmp_path)
    assert ("capacity_limit" in found) is flagged
    if flagged:
        assert "2 of 9 directions" in found["capacity_limit"].evidence and "10 classes" in found["capacity_limit"].fix


def test_a_capacity_limit_is_listed_before_the_plateau_at_chance_it_explains(tmp_path):
    rng = np.random.default_rng(1)
    run = Run().set("train/loss", lambda s, v: CHANCE + rng.normal(0, 0.02))
    run.set("val/loss", lambda s, v: CHANCE - 0.01, kind="eval")
    run.summary["best_val_accuracy"] = 0.11
    run.summary["output_directions"] = {"directions": 1, "classes": 10, "samples": 256, "spectrum": [1.0, 0.02]}
    found = diagnose(load_run(run.write(tmp_path / "run")))
    assert [f.name for f in found] == ["capacity_limit", "plateau_at_chance"]
    assert found[0].severity is Severity.CRITICAL


@pytest.mark.parametrize("model, flagged", [("user_code.Bottleneck", True), ("user_code.Classifier", False)])
def test_a_trained_bottleneck_is_named_and_a_wide_classifier_is_not(tmp_path, model, flagged):
    from conftest import train

    _, summary = train(["model=mlp", "data=synthetic", "data.num_classes=20", f"model._target_={model}",
                        "trainer.max_steps=300", "trainer.eval_every=50", "trainer.log_every=10", "logger=none",
                        "optim.lr=3e-3"], tmp_path / "run")
    measured = summary["output_directions"]
    assert measured["classes"] == 20 and (measured["directions"] <= 3) is flagged
    assert ("capacity_limit" in {f.name for f in diagnose(load_run(tmp_path / "run"))}) is flagged


def outlying_targets(run: Run) -> Run:
    run.summary.update({"task": "regression", "chance_loss": None, "prior_loss": 1.0})
    run.summary["target_outliers"] = {"checked": 5000, "count": 50, "quartiles": [-0.4, 0.4],
                                      "samples": [{"index": 3074, "target": 1280.0}]}
    return run


def test_outlier_targets_lift_the_train_loss_and_are_not_a_divergence(tmp_path):
    """1% of regression targets in the wrong unit: the train loss climbs (their squared errors), the
    val loss keeps falling. The data is named, not the LR."""
    run = outlying_targets(Run()).set("train/loss", lambda s, v: 1e3 * (1 + s / 100))
    run.set("val/loss", [0.12, 0.07, 0.06, 0.055], kind="eval")
    found = run.findings(tmp_path)
    assert "diverging" not in found
    assert "#3074 (target 1.28e+03)" in found["outlier_samples"].evidence


def test_outliers_behind_the_clip_show_in_the_pre_clip_norm(tmp_path):
    """The clip shrinks the updates holding the outliers, so the loss hides them; the pre-clip norm
    of those windows does not."""
    run = Run().set("grad/norm_max", lambda s, v: 30.0 if s % 40 == 0 else 1.0)
    run.summary["input_outliers"] = {"checked": 4000, "count": 80, "median_norm": 10.0,
                                     "samples": [{"index": 2198, "input_norm": 389.0}]}
    finding = run.findings(tmp_path)["outlier_samples"]
    assert "10 log windows' largest pre-clip gradient norm" in finding.evidence and "clip=1 hides" in finding.evidence
    run.summary["input_outliers"]["count"] = 0
    assert "outlier_samples" not in run.findings(tmp_path / "clean")  # spikes alone do not name samples


def test_outliers_averaged_into_batch_norm_explain_its_eval_gap(tmp_path):
    run = Run().set("val/loss_on_train", lambda s, v: 3 * Run.loss_at(s), kind="eval")
    run.summary["modules"] = ["BatchNorm2d", "Conv2d", "Linear"]
    run.summary["input_outliers"] = {"checked": 1400, "count": 14, "median_norm": 3.9,
                                     "samples": [{"index": 1141, "input_norm": 229.0}]}
    found = diagnose(load_run(run.write(tmp_path / "run")))
    assert [f.name for f in found][:2] == ["outlier_samples", "bn_eval_gap"]
    assert found[0].severity is Severity.CRITICAL and "running statistics" in found[0].evidence


@pytest.mark.parametrize("count, inflated, flagged", [(82, True, True), (82, False, False), (900, True, False),
                                                      (0, True, False)])
def test_outlier_samples_from_out_of_line_inputs_and_the_training_loss_they_lift(tmp_path, count, inflated, flagged):
    """No guard skip: the build-time scan found inputs 1000x the median norm, and the batches holding
    them keep the train loss 3x above the loss on the (clean) validation samples."""
    if inflated:
        run = Run().set("train/loss", lambda s, v: 3 * Run.loss_at(s))
    else:
        run = Run()
    run.summary["input_outliers"] = {"checked": 4096, "count": count, "median_norm": 5.6,
                                     "samples": [{"index": 162, "input_norm": 8186.0}, {"index": 1408, "input_norm": 7112.0}]}
    found = run.findings(tmp_path)
    assert ("outlier_samples" in found) is flagged
    if flagged:
        assert "#162 (input norm 8.19e+03)" in found["outlier_samples"].evidence
        assert "lower LR does not fix the data" in found["outlier_samples"].fix


# ---------------------------------------------------------------------------- the user's own objective

def _objective_run(kl: list[float], recon: list[float], ranks: list[float] | None = None,
                   initial_rank: float | None = None) -> Run:
    """A user objective's run: its parts (and the embeddings' effective rank) on the eval rows."""
    run = Run()
    run.summary.update(user_loss="mypkg.elbo", chance_loss=None, optimum_loss=None,
                       initial_effective_rank=initial_rank)
    for i, row in enumerate(run.evals):
        row.pop("val/accuracy")
        row.update({"val/loss/kl": kl[i], "val/loss/reconstruction": recon[i], "val/loss": kl[i] + recon[i]})
        if ranks is not None:
            row["val/effective_rank"] = ranks[i]
    return run


def test_posterior_collapse_reads_the_kl_part_and_the_reconstructions_plateau(tmp_path):
    n = len(EVAL_STEPS)
    collapsed = _objective_run([0.02] * n, [41.0] + [40.0] * (n - 1))
    names = {f.name for f in diagnose(load_run(collapsed.write(tmp_path / "collapsed")))}
    assert "posterior_collapse" in names
    in_use = _objective_run([0.02] + [3.0] * (n - 1), [41.0] + [30.0] * (n - 1))  # the latent carries nats
    assert "posterior_collapse" not in {f.name for f in diagnose(load_run(in_use.write(tmp_path / "in_use")))}
    learning = _objective_run([0.02] * n, [60.0 - 5 * i for i in range(n)])  # still improving without it
    assert "posterior_collapse" not in {f.name for f in diagnose(load_run(learning.write(tmp_path / "learning")))}


def test_representation_collapse_counts_the_untrained_models_rank(tmp_path):
    n = len(EVAL_STEPS)
    parts = ([1.0] * n, [1.0] * n)
    falling = _objective_run(*parts, ranks=[6.0, 4.0, 2.0, 1.5][:n] + [1.4] * (n - 4))
    assert "representation_collapse" in {f.name for f in diagnose(load_run(falling.write(tmp_path / "falling")))}
    early = _objective_run(*parts, ranks=[1.8] * n, initial_rank=7.0)  # collapsed before the first eval
    assert "representation_collapse" in {f.name for f in diagnose(load_run(early.write(tmp_path / "early")))}
    narrow = _objective_run(*parts, ranks=[1.8] * n, initial_rank=2.0)  # never wider than that
    assert "representation_collapse" not in {f.name for f in diagnose(load_run(narrow.write(tmp_path / "narrow")))}


def test_drowned_part_needs_a_dominant_share_and_a_part_that_did_not_improve(tmp_path):
    def run_with(dominant_share: float, ink: list[float]) -> set[str]:
        run = _objective_run([0.0] * len(EVAL_STEPS), [1.0] * len(EVAL_STEPS))
        for i, row in enumerate(run.train):
            row["train/loss/digit"] = 2.3 - 0.04 * i
            row["train/loss/ink"] = ink[i]
            if i % 5 == 0:
                row["grad_share/digit"], row["grad_share/ink"] = dominant_share, 1 - dominant_share
        return {f.name for f in diagnose(load_run(run.write(tmp_path / f"{dominant_share}-{ink[-1]}")))}

    n = len(STEPS)
    assert "drowned_part" in run_with(0.99, [0.09] * n)  # stood still beside a part that took the gradient
    assert "drowned_part" not in run_with(0.99, [0.09 * 0.9 ** i for i in range(n)])  # learned anyway
    assert "drowned_part" in run_with(0.99, [0.09 * 1.05 ** i for i in range(n)])  # pushed up by the other
    assert "drowned_part" not in run_with(0.80, [0.09] * n)  # the gradient was shared
