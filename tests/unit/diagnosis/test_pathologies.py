"""Each pathology preset (conf/experiment/pathology/) trains with the real harness and is diagnosed
with its name; undoing the preset's one bad setting makes that finding go away, so the finding
is caused by the pathology and not by the preset's other choices. The healthy baseline gets none.
"""
from __future__ import annotations

import pytest

from conftest import CONF, train, wait_for_plots
from harness.diagnosis import Severity, diagnose, load_run, write_report

pytestmark = pytest.mark.trajectory  # follows unstable runs: checked under other kernels too (docs/testing.md)

# preset, the finding it must produce, the override that removes its cause
CASES = [
    ("lr_too_high", "diverging", "optim.lr=0.05"),
    ("post_ln_no_warmup", "vanishing_gradients", "model.ln_position=pre"),
    ("deep_sigmoid", "vanishing_gradients", "model.activation=relu"),
    ("dead_relu", "dead_relu", "optim.lr=1e-3"),
    ("fp16_no_scaler", "fp16_underflow", "precision.loss_scaling=true"),
    ("accum_sum", "diverging", "accum_reduction=mean"),
    ("shuffled_labels", "plateau_at_chance", "data.shuffle_labels=false"),
    ("clip_too_low", "clip_pinned", "clip=1.0"),
    ("overfitting", "overfitting", "data.n_train=4096"),
    ("underfitting", "underfitting", "model.width=64"),
    ("bn_eval_gap", "bn_eval_gap", "model.bn_momentum=0.1"),
    ("rnn_exploding", "exploding_gradients", "clip=1.0"),
    ("epoch_boundary_jumps", "epoch_boundary_jumps", "data.shuffle=true"),
    ("deep_no_residual", "vanishing_gradients", "model.residual=true"),
]


def test_every_preset_is_tested():
    presets = {p.stem for p in (CONF / "experiment" / "pathology").glob("*.yaml")}
    assert presets == {preset for preset, _, _ in CASES} | {"healthy"}


@pytest.mark.parametrize("preset,finding,cure", CASES, ids=[c[0] for c in CASES])
def test_removing_the_cause_removes_the_finding(preset, finding, cure, tmp_path):
    train([f"experiment=pathology/{preset}", "diagnose=false", cure], tmp_path / "run")
    assert finding not in [f.name for f in diagnose(load_run(tmp_path / "run"))]


# Findings whose fix needs a person: the labels, the data, the model's capacity or mode handling.
NEEDS_A_PERSON = {"shuffled_labels", "overfitting", "underfitting", "bn_eval_gap", "epoch_boundary_jumps"}


@pytest.mark.parametrize("preset,finding,cure", CASES, ids=[c[0] for c in CASES])
def test_preset_is_diagnosed_and_its_declared_remedy_heals_it_within_two_attempts(preset, finding, cure, tmp_path):
    """The report names the preset's finding and its remedy, as overrides to paste; that remedy,
    applied by hand as diagnose.remedy=auto would, heals the run: when the next run shows another
    finding (a deep sigmoid MLP behind an fp16 underflow), its remedy comes on top."""
    overrides = [f"experiment=pathology/{preset}", "diagnose=false"]
    train(overrides, tmp_path / "0")
    findings = {f.name: f for f in write_report(tmp_path / "0", plots=False)}
    assert finding in findings
    remedy = findings[finding].remedy
    assert (remedy is None) == (preset in NEEDS_A_PERSON)
    if remedy is None:
        return
    report = (tmp_path / "0" / "report.md").read_text()
    assert f"{remedy.describe()}." in report and "(safe to apply without a person" in report
    applied = []
    for attempt in (1, 2):
        remedy = next((f.remedy for f in findings.values() if f.remedy and f.remedy not in applied), None)
        if remedy is None:
            break
        applied.append(remedy)
        overrides += remedy.overrides
        train(overrides, tmp_path / str(attempt))
        findings = {f.name: f for f in diagnose(load_run(tmp_path / str(attempt)))}
        if not any(f.severity is Severity.CRITICAL for f in findings.values()) and finding not in findings:
            break
    assert applied and finding not in findings, (applied, list(findings))
    assert not [f.name for f in findings.values() if f.severity is Severity.CRITICAL], (applied, list(findings))


def test_healthy_baseline_has_no_finding_and_the_run_writes_its_report(tmp_path):
    """With diagnose=true the run itself writes report.md at the end."""
    _, summary = train(["experiment=pathology/healthy", "diagnose=true"], tmp_path / "run")
    assert summary["status"] == "completed"
    assert "No pathology found" in (tmp_path / "run" / "report.md").read_text()  # written before the run returns
    report = wait_for_plots(tmp_path / "run")  # the plots follow from a background process
    assert "](plots/loss.png)" in report and (tmp_path / "run" / "plots" / "loss.png").is_file()
    assert write_report(tmp_path / "run") == []


HEALTHY_FAMILIES = {
    "resnet": ["experiment=digits_resnet", "trainer.max_steps=200", "trainer.eval_every=50"],
    "lstm": ["experiment=stdlib_lstm", "model.hidden=128", "model.block_size=32", "trainer.max_steps=150",
             "trainer.log_every=10", "trainer.eval_every=50", "trainer.eval_batches=5"],
}


@pytest.mark.parametrize("family", HEALTHY_FAMILIES)
def test_healthy_runs_of_the_new_families_raise_no_alarm(family, tmp_path):
    if family == "resnet":
        pytest.importorskip("sklearn", reason="data=digits needs the optional vision extra")
    train([*HEALTHY_FAMILIES[family], "diagnose=false"], tmp_path / "run")
    alarms = [f.name for f in diagnose(load_run(tmp_path / "run")) if f.severity is not Severity.INFO]
    assert alarms == []


# A user model that ignores its input collapses to the prior: below ln K, far above what a model
# that reads its input reaches. The tiny GPT on the same data and budget goes below the prior.
PRIOR_RUN = ["trainer.max_steps=200", "trainer.log_every=10", "trainer.eval_every=40", "batch_size=16",
             "optim.lr=0.05", "schedule.warmup=10"]


def test_a_model_blind_to_its_inputs_is_named_plateau_at_prior(tmp_path):
    _, summary = train([*PRIOR_RUN, "model._target_=user_code.FrequenciesOnly"], tmp_path / "blind")
    assert 0 < summary["prior_loss"] < 0.7 * summary["chance_loss"]
    names = [f.name for f in diagnose(load_run(tmp_path / "blind"))]
    assert names[:1] == ["plateau_at_prior"], names
    _, healthy = train([*PRIOR_RUN, "optim.lr=3e-3", "model.n_layer=2", "model.n_embd=64", "model.n_head=2",
                        "model.block_size=32"], tmp_path / "gpt")
    assert healthy["best_val_loss"] < 0.9 * healthy["prior_loss"]
    assert "plateau_at_prior" not in [f.name for f in diagnose(load_run(tmp_path / "gpt"))]


def test_parameters_the_loss_never_reaches_are_named(tmp_path):
    run = ["data=synthetic", "trainer.max_steps=100", "trainer.log_every=5", "trainer.eval_every=50"]
    _, summary = train([*run, "model._target_=user_code.WithSpareHead"], tmp_path / "spare")
    finding = {f.name: f for f in diagnose(load_run(tmp_path / "spare"))}["unused_parameters"]
    assert finding.evidence.startswith("2 trainable tensor(s)")  # spare_head's weight and bias
    train([*run, "model=mlp"], tmp_path / "mlp")
    assert "unused_parameters" not in [f.name for f in diagnose(load_run(tmp_path / "mlp"))]
