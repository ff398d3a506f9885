"""The run's outcome, from its own evals against the untrained model's: learned or not, ended near
its best or clearly worse over a sustained stretch, non-finite; for a loss and for a metric."""
from __future__ import annotations

import math

from diagnosis_runs import Run
from harness.diagnosis import load_run
from harness.diagnosis.outcome import GUESSING_ONLY, LEARNED, NEAR, NEVER, NONFINITE, PRIOR_ONLY, WORSE, outcome


def judged(run: Run, tmp_path, **summary):
    run.summary.update(summary)
    return outcome(load_run(run.write(tmp_path / "run")))


def test_a_run_that_learned_and_ended_at_its_best(tmp_path):
    found = judged(Run(), tmp_path, initial_val_loss=2.30)
    assert (found.state, found.ending) == (LEARNED, NEAR) and not found.bad
    assert found.start == 2.30 and found.best_step == 400 and "learned, ended near its best" in found.line()


def test_one_bad_eval_is_not_an_ending_but_a_sustained_climb_is(tmp_path):
    one = Run().set("val/loss", lambda s, v: 1.5 if s == 400 else v, kind="eval")
    assert judged(one, tmp_path / "one", initial_val_loss=2.30).ending == NEAR  # worse needs its last 2 evals
    two = Run().set("val/loss", lambda s, v: v if s < 300 else 3.0, kind="eval")
    found = judged(two, tmp_path / "two", initial_val_loss=2.30)
    assert found.ending == WORSE and found.bad and found.state == LEARNED


def test_never_left_its_start_and_beat_only_its_start(tmp_path):
    flat = Run().set("val/loss", lambda s, v: 2.30, kind="eval")
    assert judged(flat, tmp_path / "flat", initial_val_loss=2.30).state == NEVER
    assert judged(Run(), tmp_path / "prior", initial_val_loss=2.30, val_prior_loss=0.4).state == PRIOR_ONLY
    # under your own objective the built-in prior is in other units: only the objective's own `prior` part counts
    assert judged(Run(), tmp_path / "user", initial_val_loss=2.30, val_prior_loss=0.4, user_loss="my.loss",
                  prior_loss=None).state == LEARNED
    assert judged(Run(), tmp_path / "own", initial_val_loss=2.30, val_prior_loss=0.4, user_loss="my.loss",
                  prior_loss=0.4).state == PRIOR_ONLY


def test_a_nonfinite_run_and_a_run_without_a_baseline(tmp_path):
    nan = Run().set("train/loss", lambda s, v: math.nan if s > 200 else v)
    assert judged(nan, tmp_path / "nan", initial_val_loss=2.30).state == NONFINITE
    assert judged(Run(), tmp_path / "old") is None


def test_a_monitor_that_is_better_higher(tmp_path):
    rising = Run().set("val/f1", lambda s, v: 0.2 + s / 1000, kind="eval")
    found = judged(rising, tmp_path, monitor={"name": "val/f1", "mode": "max"}, initial_val_f1=0.2)
    assert found.monitor == "val/f1" and found.state == LEARNED and found.best == 0.2 + 0.4


def test_a_run_that_got_worse_or_never_moved_is_told_so_where_no_other_warning_is(tmp_path):
    from harness.diagnosis import diagnose

    climbed = Run().set("val/loss", lambda s, v: v if s < 300 else 1.5, kind="eval").set(
        "train/loss", lambda s, v: v if s < 250 else v + 0.6)  # no other rule speaks (no memorising: both rose)
    climbed.summary["initial_val_loss"] = 2.30
    found = {f.name: f for f in diagnose(load_run(climbed.write(tmp_path / "worse")))}
    assert "ended_worse" in found and "step 200" in found["ended_worse"].evidence  # best.pt's step
    flat = Run().set("val/loss", lambda s, v: 2.31, kind="eval")
    flat.summary["initial_val_loss"] = 2.30
    assert "never_learned" in {f.name for f in diagnose(load_run(flat.write(tmp_path / "flat")))}
    prior = Run()  # below the untrained model, never clearly below the prior: a model blind to its inputs
    prior.summary.update(initial_val_loss=2.30, val_prior_loss=0.39)
    found = {f.name: f for f in diagnose(load_run(prior.write(tmp_path / "prior")))}
    assert found["never_learned"].title == "no eval clearly beat predicting the prior"
    healthy = Run()
    healthy.summary["initial_val_loss"] = 2.30
    assert diagnose(load_run(healthy.write(tmp_path / "healthy"))) == []


def test_a_critical_needs_a_run_that_did_not_work(tmp_path):
    """One update in the first window at 10x the loss, then the run learned and ended at its best:
    diverging is told, as a warning that says why it is not critical. The same excursion in a run
    that never left its start stays critical."""
    from harness.diagnosis import diagnose

    excursion = Run().set("train/loss_max", lambda s, v: 60.0 if s == 10 else v).set("val/loss", [1.2, 0.9, 0.95, 0.92],
                                                                                  kind="eval")
    assert excursion.findings(tmp_path / "old")["diverging"].severity.value == "critical"  # no baseline: as before
    excursion.summary["initial_val_loss"] = 2.30
    found = {f.name: f for f in diagnose(load_run(excursion.write(tmp_path / "learned")))}
    assert found["diverging"].severity.value == "warning"
    assert "Not critical: by its own evals the run learned, ended near its best" in found["diverging"].evidence
    assert all(f.severity.value != "critical" for f in found.values())
    stuck = Run().set("train/loss", lambda s, v: 2.3).set("train/loss_max", lambda s, v: 60.0 if s == 10 else 2.4)
    stuck.set("val/loss", lambda s, v: 2.3, kind="eval").summary["initial_val_loss"] = 2.30
    found = {f.name: f for f in diagnose(load_run(stuck.write(tmp_path / "stuck")))}
    assert found["diverging"].severity.value == "critical" and "Not critical" not in found["diverging"].evidence



def test_a_finding_about_the_curves_shape_is_an_info_on_a_run_that_learned(tmp_path):
    """Three climbs of the train loss (oscillating) in a run whose val loss fell to its best at the
    end: an info that says why; the same curves in a run with no baseline keep their warning."""
    from harness.diagnosis import diagnose
    from test_diagnosis_curves import bumps

    climbs = Run().set("train/loss", bumps)
    assert climbs.findings(tmp_path / "old")["oscillating"].severity.value == "warning"
    climbs.summary["initial_val_loss"] = 2.30
    found = {f.name: f for f in diagnose(load_run(climbs.write(tmp_path / "learned")))}
    assert found["oscillating"].severity.value == "info"
    assert "Not a warning: by its own evals the run learned, ended near its best" in found["oscillating"].evidence


def test_a_classifier_whose_accuracy_never_beat_guessing_did_not_learn(tmp_path):
    """Ten classes, the val loss a few % below its prior and its start, but the best accuracy is the
    largest class's share: every prediction is still that class, so the run did not work."""
    guessing = Run().set("val/loss", [2.30, 2.27, 2.25, 2.23], kind="eval").set("train/loss", lambda s, v: 2.25)
    guessing.summary.update(initial_val_loss=2.31, val_prior_loss=2.30, best_val_accuracy=0.129,
                            val_majority_share=0.129, eval_samples=256)
    found = judged(guessing, tmp_path / "guessing")
    assert found.state == GUESSING_ONLY and found.bad
    guessing.summary["best_val_accuracy"] = 0.40
    assert judged(guessing, tmp_path / "classifies").state == LEARNED


def test_the_outcome_caps_severities_but_keeps_their_order(tmp_path, monkeypatch):
    """On a run that learned, every critical becomes a warning, in the order the rules judged them:
    what they judged critical before what they judged a warning; at the same judgement, a finding
    the outcome contradicts (the loss ran away) after one it does not (dead units)."""
    from harness.diagnosis import Finding, Severity, diagnose, rules

    def stub(name: str, severity: Severity):
        def rule(run):
            return Finding(name, severity, name, "evidence.", "fix.")
        rule.__name__ = name
        return rule

    run = load_run(Run().write(tmp_path / "learned"))
    run.summary["initial_val_loss"] = 2.30
    monkeypatch.setattr(rules, "RULES", (stub("diverging", Severity.CRITICAL), stub("dead_relu", Severity.CRITICAL)))
    assert [(f.name, f.severity.value) for f in diagnose(run)] == [("dead_relu", "warning"), ("diverging", "warning")]
    monkeypatch.setattr(rules, "RULES", (stub("dead_relu", Severity.WARNING), stub("diverging", Severity.CRITICAL)))
    assert [f.name for f in diagnose(run)] == ["diverging", "dead_relu"]  # judged critical, held to a warning
    del run.summary["initial_val_loss"]  # no baseline: nothing is held, severities as judged
    assert [f.severity.value for f in diagnose(run)] == ["critical", "warning"]
