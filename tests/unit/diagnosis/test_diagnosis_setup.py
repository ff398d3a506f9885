"""The diagnosis rules about what the run was built with (frozen parameters, split overlap and
mismatch, the forward's numbers, the output, inputs and targets, capacity, outliers, your own
objective's parts), on synthetic runs."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from diagnosis_runs import CHANCE, EVAL_STEPS, PRICES, Run, STANDARD, STEPS, _objective_run, outlying_targets
from harness.diagnosis import Severity, diagnose, load_run
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.setup import unnormalised_inputs


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


def test_a_nonfinite_output_from_the_forwards_own_code_is_named_there_with_no_remedy(tmp_path):
    """Every module returned finite values, the model's output did not: a log written in the forward.
    It leads the non-finite loss beside it, and no config change it could offer reaches that code."""
    run = Run().set("train/loss", lambda s, v: math.nan)
    run.summary.update(status="diverged", forward={"nonfinite": {"module": "", "type": "Net", "input_max": 1.0,
                                                                 "after": "out", "after_type": "Linear"}})
    findings = run.findings(tmp_path)
    found = findings["forward_overflow"]
    assert list(findings)[0] == "forward_overflow" and found.title == "the forward pass is not finite"
    assert "`out` (Linear)" in found.evidence and "forward's own code" in found.evidence and not found.remedies


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


@pytest.mark.parametrize("scale, named", [(240.0, True), (1.2, False)])
def test_unnormalised_inputs_under_the_users_objective_are_named_not_judged(scale, named):
    """No ln K or prior says where the user's loss starts: the scale is an info (raised like any cause
    beside what it explains) whose fix is in the dataset, since data.standardize is refused there."""
    stats = {"max_abs_feature_median": scale, "max_feature_spread": 8.4 if scale > 10 else 1.0, "rms": scale}
    run = RunData(Path("run"), {}, {"user_loss": "mypkg.objective", "input_stats": stats}, [], [])
    finding = unnormalised_inputs(run)
    assert (finding is not None) == named
    if named:
        assert finding.severity is Severity.INFO and "|median| 240" in finding.evidence
        assert "not judged" in finding.evidence and "in your dataset" in finding.fix and not finding.remedies


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


@pytest.mark.trajectory
@pytest.mark.parametrize("model, flagged", [("user_code.Bottleneck", True), ("user_code.Classifier", False)])
def test_a_trained_bottleneck_is_named_and_a_wide_classifier_is_not(tmp_path, model, flagged):
    from conftest import train

    _, summary = train(["model=mlp", "data=synthetic", "data.num_classes=20", f"model._target_={model}",
                        "trainer.max_steps=300", "trainer.eval_every=50", "trainer.log_every=10", "logger=none",
                        "optim.lr=3e-3"], tmp_path / "run")
    measured = summary["output_directions"]
    assert measured["classes"] == 20 and (measured["directions"] <= 3) is flagged
    assert ("capacity_limit" in {f.name for f in diagnose(load_run(tmp_path / "run"))}) is flagged


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


def test_collapsed_reconstructions_get_a_decoders_advice_not_a_contrastive_ones(tmp_path):
    n = len(EVAL_STEPS)
    run = _objective_run([1.0] * n, [1.0] * n, ranks=[1.8] * n, initial_rank=7.0)
    run.summary["rank_rows_input_wide"] = True  # and its parts are kl and reconstruction
    finding = {f.name: f for f in diagnose(load_run(run.write(tmp_path / "vae")))}["representation_collapse"]
    assert "every input decodes to nearly the same output" in finding.title
    assert "InfoNCE" not in finding.fix and "temperature" not in finding.fix and "decoder" in finding.fix
    run.summary["rank_rows_input_wide"] = False
    finding = {f.name: f for f in diagnose(load_run(run.write(tmp_path / "emb")))}["representation_collapse"]
    assert "InfoNCE" in finding.fix


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


def test_three_evals_judge_a_collapse_and_fewer_are_said_to_be_too_few(tmp_path):
    """beta=100 evaluated 3 times is judged; at 2 evals the report says what was not judged, and why."""
    from harness.diagnosis.report import render

    three = _objective_run([0.02] * 4, [41.0, 40.0, 40.0, 40.0])
    three.evals = three.evals[:3]
    run = load_run(three.write(tmp_path / "three"))
    assert "posterior_collapse" in {f.name for f in diagnose(run)}
    assert "they read at least 3 evals" not in render(run, diagnose(run), [])
    two = _objective_run([0.02] * 4, [41.0, 40.0, 40.0, 40.0])
    two.evals = two.evals[:2]
    run = load_run(two.write(tmp_path / "two"))
    assert "posterior_collapse" not in {f.name for f in diagnose(run)}
    report = render(run, diagnose(run), [])
    assert "| not judged | the plateaus, over- and underfitting" in report
    assert "posterior and representation collapse" in report and "they read at least 3 evals, and this run has 2" in report
    assert "| not judged | the outcome (did the run learn" in report  # no baseline eval in this run


def test_a_metric_that_never_left_the_untrained_models_value_while_the_loss_moved_is_named(tmp_path):
    frozen = Run().set("val/label_accuracy", lambda s, v: 0.62, kind="eval")
    frozen.summary.update(initial_val_loss=2.30, initial_val_label_accuracy=0.62)
    found = {f.name: f for f in diagnose(load_run(frozen.write(tmp_path / "frozen")))}
    assert found["frozen_metric"].severity.value == "warning"
    assert "`val/label_accuracy` was 0.62 untrained and exactly that at each of 4 evals" in found[
        "frozen_metric"].evidence
    moved = Run().set("val/label_accuracy", lambda s, v: 0.62 if s < 400 else 0.7, kind="eval")
    moved.summary.update(initial_val_loss=2.30, initial_val_label_accuracy=0.62)
    assert "frozen_metric" not in {f.name for f in diagnose(load_run(moved.write(tmp_path / "moved")))}
    still = Run().set("val/label_accuracy", lambda s, v: 0.62, kind="eval").set("val/loss", lambda s, v: 2.30,
                                                                                  kind="eval")
    still.summary.update(initial_val_loss=2.30, initial_val_label_accuracy=0.62)  # the loss did not move either
    assert "frozen_metric" not in {f.name for f in diagnose(load_run(still.write(tmp_path / "still")))}
