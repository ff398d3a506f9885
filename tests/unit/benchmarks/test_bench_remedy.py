"""bench/remedy.py: which runs it trains, what their cures undo, how it scores, and one
real invocation through train.py."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, compose_cfg
from harness.config.run_config import validate_config

from bench import remedy as bench

pytestmark = pytest.mark.trajectory  # follows unstable runs: checked under other kernels too (docs/testing.md)

SICK = bench.sick_runs(3, bench.DEFAULT_DRAW)
HEALTHY = bench.healthy_runs(12, bench.DEFAULT_DRAW)


def _keys(overrides: tuple[str, ...]) -> dict[str, str]:
    return dict(o.split("=", 1) for o in overrides if "=" in o)  # not the deletions (~optim.betas)


def test_enough_sick_and_healthy_runs_across_every_remedy_class_and_family():
    assert len(SICK) >= 30 and len(HEALTHY) >= 10
    assert {s.cause for s in SICK} == set(bench.CULPRITS)
    assert len({s.name for s in [*SICK, *HEALTHY]}) == len(SICK) + len(HEALTHY)
    models = {_keys(s.given).get("model") for s in SICK} | {_keys(s.given).get("model._target_") for s in SICK}
    assert {"gpt", "mlp", "rnn", "resnet"} <= models
    assert {"bench.suite_models.Net", "bench.suite_models.CharRNN"} <= models  # user models through model._target_
    held_lr = [h for h in HEALTHY if "schedule=constant" in h.given]  # where slow_progress reads a run's pace
    assert len(held_lr) >= 4 and {h.name for h in held_lr} < {h.name for h in HEALTHY}


def test_a_cured_run_undoes_only_the_bad_setting_of_its_class():
    for s in SICK:
        given, cured = _keys(s.given), _keys(s.cured)
        changed = {k for k in given.keys() | cured.keys() if given.get(k) != cured.get(k)}
        assert changed, s.name
        if s.name.startswith("preset/"):
            assert len(changed) == 1
        else:
            assert changed <= set(bench.CULPRITS[s.cause]) and not changed & cured.keys(), s.name
    assert all(h.given == h.cured for h in HEALTHY)


def test_checkpoints_fall_at_every_eval_so_a_remedy_can_continue_one():
    for s in [*SICK, *HEALTHY]:
        keys = _keys(s.given)
        if "trainer.eval_every" in keys:
            assert keys["trainer.ckpt_every"] == keys["trainer.eval_every"], s.name


@pytest.mark.parametrize("run", SICK[::5], ids=lambda s: s.name)
def test_runs_pass_the_harness_config_checks(run):
    """A run the harness refused would score as a miss for the wrong reason."""
    for overrides in (run.given, (*run.given, *bench.AUTO), run.cured):
        validate_config(compose_cfg(list(overrides)))


def test_healed_means_no_critical_finding_and_a_loss_within_ten_percent_of_the_cure():
    cured = {"best_val_loss": 1.0}
    assert bench.healed({"best_val_loss": 1.09, "critical": []}, cured)
    assert not bench.healed({"best_val_loss": 1.11, "critical": []}, cured)
    assert not bench.healed({"best_val_loss": 0.5, "critical": ["diverging"]}, cured)
    assert not bench.healed({"best_val_loss": float("nan"), "critical": []}, cured)
    assert not bench.healed({"best_val_loss": None, "critical": []}, cured)
    assert not bench.healed({"best_val_loss": 1.0, "critical": [], "error": "exit 1: boom"}, cured)
    assert not bench.healed({"best_val_loss": 1.0, "critical": []}, {"best_val_loss": None})  # no reference


def test_a_cause_in_the_programs_own_code_is_reached_when_remedy_auto_names_the_fixs_line():
    """d4ml_001's fix edits line 55 of its port: a `needs a code change` verdict naming that line
    reaches it; another line, another verdict, or a config fix does not."""
    line = [["bench/ports/d4ml_001.py", 55]]
    assert bench.reached_in_code("external/d4ml_001", {"verdict": "needs a code change", "code_lines": line})
    assert not bench.reached_in_code("external/d4ml_001", {"verdict": "needs a code change",
                                                          "code_lines": [["bench/ports/d4ml_001.py", 54]]})
    assert not bench.reached_in_code("external/d4ml_001", {"verdict": "unchanged", "code_lines": line})
    assert not bench.reached_in_code("external/so_39525358", {"verdict": "needs a code change",
                                                             "code_lines": [["bench/ports/so_39525358.py", 1]]})


def test_a_run_without_a_val_loss_ranks_below_every_finite_loss():
    """Where an unstable run first blows up depends on the CPU's kernels: one that diverged before its
    first eval has no val loss, and compares as worse than any run that has one."""
    assert bench.ranked_loss(None) > bench.ranked_loss(1e30) > bench.ranked_loss(1.0)
    assert bench.ranked_loss(float("nan")) == bench.ranked_loss(None) == float("inf")
    assert bench._num(None) == "—"


@pytest.mark.slow  # three whole runs; the scoring it drives is unit-tested above
def test_a_real_invocation_heals_a_preset_and_rescoring_reproduces_it(tmp_path):
    out = tmp_path / "bench"
    cmd = [sys.executable, "-m", "bench.remedy", "--only", "preset/accum_sum", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    (row,) = results["sick"]
    assert row["name"] == "preset/accum_sum" and row["remedies"] == [["accum_reduction=mean"]]
    assert row["verdict"] == "healed" and row["healed"] and not row["fine_without"]
    # The run as given diverges on every CPU, before its first eval (no val loss) on some kernels
    assert row["loss_auto"] <= 1.1 * row["loss_cured"] < bench.ranked_loss(row["loss_given"])
    summary = json.loads((out / row["name"] / "auto" / "summary.json").read_text())
    first, second = summary["attempts"]
    # attempt 1 stopped where its finding was confirmed: at once on a non-finite loss, else at the
    # second eval that had it (here the last, so it may run to the end); attempt 2 continued the
    # checkpoint before its symptom where one was written, else started over
    assert first["steps"] <= summary["max_steps"] and second["steps"] == summary["max_steps"]
    assert second["restart_step"] in (None, *range(50, first["steps"] + 1, 50))  # checkpoints at every eval
    trained = first["steps"] + second["steps"] - (second["restart_step"] or 0)
    assert trained == round(row["compute"] * summary["max_steps"]) and 1.0 < row["compute"] <= 2.0
    assert "sick runs healed: 1/1" in (out / "results.md").read_text()
    rescored = subprocess.run([*cmd, "--rescore"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rescored.returncode == 0, rescored.stderr[-3000:]
    assert json.loads((out / "results.json").read_text()) == results


def test_the_external_programs_are_cured_by_their_authors_fixes_on_the_same_task():
    external = bench.external_runs()
    assert len(external) >= 14 and all(s.cause == bench.EXTERNAL for s in external)
    for s in external:
        given, cured = _keys(s.given), _keys(s.cured)
        assert given["data.task"] == cured["data.task"] and given["data._target_"] == cured["data._target_"]
        assert given["diagnose.live"] == "true" and given["trainer.ckpt_every"] == given["trainer.eval_every"]
    validate_config(compose_cfg([*external[0].given, *bench.AUTO]))


def test_worse_compares_the_run_with_remedies_to_the_run_as_given_on_the_regression_scale():
    assert bench.worse({"best_val_loss": 2.0}, {"best_val_loss": 1.0})
    assert not bench.worse({"best_val_loss": 0.6666666666666666}, {"best_val_loss": 0.6666666269302368})  # float32
    assert bench.worse({"best_val_loss": 0.6667}, {"best_val_loss": 0.6666666269302368})
    assert not bench.worse({"best_val_loss": 1.0}, {"best_val_loss": None})  # as given it had no val loss
    regression = {"task": "regression", "val_prior_loss": 100.0}
    assert not bench.worse({**regression, "best_val_loss": 50.0}, {**regression, "best_val_loss": 60.0})


def test_a_fix_that_trains_another_loss_is_scored_under_the_programs_own_loss():
    """Every external fix that swaps the loss on the same data names how its weights are scored by
    the program's loss; the cured run then compares there."""
    def last(key: str, overrides: tuple[str, ...]) -> str:
        return next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith(key + "=")), "auto")

    for s in bench.external_runs():
        same_data = {o for o in s.given if o.startswith(("data", "+data"))} == \
            {o for o in s.cured if o.startswith(("data", "+data"))}
        if last("loss.function", s.given) != last("loss.function", s.cured) and same_data:
            assert s.scored_by and last("loss.function", s.scored_by) == last("loss.function", s.given), s.name
            validate_config(compose_cfg([*s.cured, *s.scored_by]))
        else:
            assert s.scored_by == (), s.name
    regression = {"task": "regression", "val_prior_loss": 0.5}
    cured = bench.as_scored({**regression, "best_val_loss": 4e-4, "val_prior_loss": 0.25, "eval_loss": 0.02},
                            regression, ("loss.function=l1",))
    assert cured["best_val_loss"] == 0.02 and cured["val_prior_loss"] == 0.5 and cured["trained_loss"] == 4e-4
    assert not bench.healed({**regression, "best_val_loss": 0.036}, cured)  # 8x better than 0.299, not the fix's MAE
    assert bench.healed({**regression, "best_val_loss": 0.021}, cured)
    assert bench.as_scored(regression, regression, ()) is regression
