"""The diagnosis rules about the run's setup over time (batch norm's eval gap, epoch boundaries, the
guard's events, the schedule, warmup, weight decay, attention entropy), on synthetic runs."""
from __future__ import annotations

import math

import numpy as np
import pytest

from diagnosis_runs import LAYERS, Run, entropy_run, shrinking, with_epochs
from harness.diagnosis import Severity


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


def test_a_mode_gap_on_losses_near_zero_is_not_named(tmp_path):
    """Labels nearly all one class: train mode reaches 3e-4 and eval mode 1.6e-3 on the same
    samples, 5x apart but 0.2% of the start loss apart: a ratio of two tiny losses, not a model
    that fails in eval mode."""
    run = Run().set("train/loss", lambda s, v: max(0.7 * math.exp(-s / 20), 3e-4))
    run.set("val/loss", [1.6e-3] * 4, kind="eval").set("val/loss_on_train", [1.6e-3] * 4, kind="eval")
    run.summary["modules"] = ["BatchNorm1d", "Linear"]
    assert "bn_eval_gap" not in run.findings(tmp_path)


def test_a_mode_gap_that_comes_and_goes_is_not_named(tmp_path):
    """At a high LR batch norm's running statistics trail the weights at one eval and catch up at
    the next: a gap at 1.7x, then none, then 1.9x, is not a model that fails in eval mode."""
    run = Run()
    gaps = {100: 1.0, 200: 1.7, 300: 1.0, 400: 1.9}
    run.set("val/loss_on_train", lambda s, v: Run.loss_at(s) * gaps[s], kind="eval")
    run.summary["modules"] = ["BatchNorm2d", "Conv2d", "Linear"]
    assert "bn_eval_gap" not in run.findings(tmp_path)
    run.set("val/loss_on_train", lambda s, v: Run.loss_at(s) * 1.9, kind="eval")  # held at every eval: named
    assert "at least 1.8" in run.findings(tmp_path)["bn_eval_gap"].evidence


def test_overfitting_with_batch_norm_stays_overfitting(tmp_path):
    run = Run().set("train/loss", lambda s, v: 2.0 * math.exp(-s / 60))
    run.set("val/loss", [1.0, 1.1, 1.3, 1.5], kind="eval")
    run.set("val/loss_on_train", lambda s, v: 2.0 * math.exp(-s / 60), kind="eval")
    assert set(run.findings(tmp_path)) == {"overfitting"}


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
    short = Run().set("grad/tensors_without_grad", lambda s, v: 4.0)
    short.train = [row for row in short.train if row["step"] % 40 == 0]  # 10 rows: 4 in the last third
    assert short.findings(tmp_path / "c")["unused_parameters"].evidence.startswith("4 trainable tensor(s)")
    short.train = short.train[-2:]  # two logged steps show no graph
    assert "unused_parameters" not in short.findings(tmp_path / "d")


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


@pytest.mark.parametrize("others, flagged", [(0.6, True), (0.75, False)])
def test_weight_decay_collapse_when_the_weights_together_fell_below_half(tmp_path, others, flagged):
    """AdamW at a huge wd holds most tensors at an equilibrium just above half their start while the
    model sits at chance: one tensor below half, all of them together (x0.45) below half too."""
    run = Run().set("param_norm/stem.0.weight", lambda s, v: 5.0 * 0.2 ** (s / 400))
    run.set("param_norm/head.weight", lambda s, v: 5.0 * others ** (s / 400))
    for name in LAYERS[1:-1]:
        run.set(f"param_norm/{name}", lambda s, v: 0.5 * others ** (s / 400))
    run.config["optim"]["weight_decay"] = 30.0
    run.set("train/loss", lambda s, v: 2.3 - 0.3 * math.sin(math.pi * s / 400))
    findings = run.findings(tmp_path)
    assert ("weight_decay_collapse" in findings) is flagged
    if flagged:  # the count says how many went below half, not how many shrank
        assert "1 of 5 weight tensors ended below half their start norm, and the 5 that shrank together" \
            in findings["weight_decay_collapse"].evidence


def test_weight_decay_collapse_behind_an_embedding_kept_out_of_decay(tmp_path):
    """A large tensor outside decay holds most of the total norm, which barely moves, while every
    decayed tensor goes to zero: judged per tensor, not by the total."""
    run = shrinking(Run(), 0.05).set("param_norm/stem.0.weight", lambda s, v: 60.0)
    for name in LAYERS[1:-1]:
        run.set(f"param_norm/{name}", lambda s, v: 0.5 * 0.05 ** (s / 400))
    run.config["optim"]["weight_decay"] = 30.0
    run.set("train/loss", lambda s, v: 2.3 - 0.3 * math.sin(math.pi * s / 400))
    assert "4 of 5 weight tensors" in run.findings(tmp_path)["weight_decay_collapse"].evidence


def test_attention_entropy_collapse(tmp_path):
    run = entropy_run(0.1)
    run.config["model"]["qk_norm"] = False
    finding = run.findings(tmp_path)["attention_entropy_collapse"]
    assert "2.44 nats at step 10, 0.306 at the end (13%" in finding.evidence and "model.qk_norm=true" in finding.fix
    assert "attention_entropy_collapse" not in entropy_run(0.8).findings(tmp_path / "b")  # heads specialise
