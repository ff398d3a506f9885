"""The diagnosis rules read off gradient and weight statistics (clipping, vanishing and exploding
gradients, dead units, weight-norm runaway, fp16), on synthetic runs."""
from __future__ import annotations

import math

import pytest

from diagnosis_runs import CHANCE, LAYERS, Run, exploding, fp16
from harness.diagnosis import Severity


def test_clip_pinned(tmp_path):
    run = Run().set("grad/clip_rate", lambda s, v: 1.0).set("grad/norm_postclip", lambda s, v: 1e-4)
    run.config["clip"] = 1e-4
    run.config["optim"]["_target_"] = "torch.optim.SGD"
    finding = run.findings(tmp_path)["clip_pinned"]
    assert finding.severity is Severity.WARNING and "clip=0.0001" in finding.evidence


@pytest.mark.parametrize("target", ["torch.optim.AdamW", "harness.training.optim.lion.Lion"])
def test_a_clip_an_optimizer_rescales_away_is_pinned_harmlessly(tmp_path, target):
    """Adam, Lion, LAMB and Muon update alike however the gradient is scaled: a pinned clip only
    stopped catching spikes (info), unless it is so small that Adam's eps takes over (a warning)."""
    run = Run().set("grad/clip_rate", lambda s, v: 1.0).set("grad/norm_preclip", lambda s, v: 10.0)
    run.config.update(clip=0.5)
    run.config["optim"].update(_target_=target, eps=1e-8)
    assert run.findings(tmp_path)["clip_pinned"].severity is Severity.INFO
    run.config["clip"] = 1e-5
    run.set("grad/norm_preclip", lambda s, v: 1e-3)
    assert run.findings(tmp_path / "eps")["clip_pinned"].severity is Severity.WARNING


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


def test_a_solved_task_has_no_exploding_gradients_and_its_dead_units_are_info_with_nothing_to_revive(tmp_path):
    """Units the solved task did not need carry no remedy: a restart to revive them cannot gain."""
    run = Run().set("train/loss", lambda s, v: 0.7 * 10 ** (-7 * s / 400))
    run.set("grad/norm_max", lambda s, v: 1e-2 if s == 300 else 1e-6).set("act_dead/hidden.1.act", lambda s, v: 0.7)
    run.config["clip"] = None
    found = run.findings(tmp_path)
    assert "exploding_gradients" not in found and found["dead_relu"].severity is Severity.INFO
    assert found["dead_relu"].remedies == ()
    unsolved = Run().set("act_dead/hidden.1.act", lambda s, v: 0.7).findings(tmp_path / "unsolved")["dead_relu"]
    assert unsolved.remedies  # the same dead layer on a run that did not solve its task


def test_small_but_usable_gradients_are_not_vanishing(tmp_path):
    run = Run()
    for name in LAYERS:
        run.set(f"grad_norm/{name}", lambda s, v: 1e-5)
    assert "vanishing_gradients" not in run.findings(tmp_path)


def test_exploding_gradients_without_clipping(tmp_path):
    run = exploding(Run(), burst=60.0)
    run.config["clip"] = None
    run.summary["modules"] = ["Embedding", "Linear", "RNN"]
    finding = run.findings(tmp_path)["exploding_gradients"]
    assert "60 at step 250" in finding.evidence and "2 log window(s)" in finding.evidence
    assert "clip=1.0 (0.5-1.0 for recurrent models" in finding.fix
    # bursts at steps 250 and 330, the worst at 330: each remedy restarts before the first
    later = run.set("grad/norm_max", lambda s, v: 100.0 if s == 330 else v).findings(tmp_path / "later")
    assert "100 at step 330" in later["exploding_gradients"].evidence
    assert [(r.overrides[0].split("=")[0], r.before_step) for r in later["exploding_gradients"].remedies] == [
        ("clip", 250), ("optim.lr", 250)]


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
