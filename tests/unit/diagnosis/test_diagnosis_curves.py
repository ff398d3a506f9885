"""The diagnosis rules read off the loss curves (diverging, the plateaus, oscillating, overfitting,
underfitting, slow progress) and the order of causes before symptoms, on synthetic runs."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from diagnosis_runs import CHANCE, LAYERS, PRIOR, Run, bumps, fmt_in, moving_slowly, slow, steady_then_rising, unfinished
from harness.diagnosis import Severity, diagnose, load_run


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


def test_slow_progress_when_the_loss_keeps_moving_on_tiny_updates(tmp_path):
    finding = moving_slowly(2e-4, [1.9, 1.2, 0.8, 0.55]).findings(tmp_path)["slow_progress"]
    assert "still held 19% of its whole fall" in finding.evidence and "normalisation layers" in finding.evidence


@pytest.mark.parametrize("ratio, val", [(2e-3, [1.9, 1.2, 0.8, 0.55]),  # healthy updates
                                        (2e-4, [1.9, 0.6, 0.56, 0.55]),  # converged: its last quarter barely moved
                                        (2e-4, [1.9, 1.2, 0.8, 0.81])])  # no longer falling
def test_small_updates_on_a_converged_or_healthy_run_are_not_slow(tmp_path, ratio, val):
    assert "slow_progress" not in moving_slowly(ratio, val).findings(tmp_path)


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
