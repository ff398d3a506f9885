"""bench/external.py: its cases compose, its split, its sources, its scoring, and one real
invocation through train.py."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT, compose_cfg
from harness.config.run_config import validate_config
from harness.diagnosis.rules import RULES

from bench import external as bench

RULE_NAMES = {rule.__name__ for rule in RULES}


def _sklearn() -> None:
    """The ports' data (iris, digits, splits) come from scikit-learn: imported by the tests that
    train or build a port, not at collection, where it costs every test worker two seconds."""
    pytest.importorskip("sklearn", reason="scikit-learn (the dev extra) is not installed")


@pytest.mark.parametrize("case", bench.CASES, ids=lambda c: c.id)
def test_every_case_composes_and_passes_the_harness_config_checks(case):
    """A program the harness refused would score as a miss for the wrong reason."""
    for variant in ("buggy", "fixed"):
        validate_config(compose_cfg(list(case.overrides(variant))))


# Round 1's split as it was decided before any diagnosis was read (and then scored): adding rounds
# must not move a case of it.
ROUND_1_PARTS = {
    "gh_averaging": "dev", "gh_facial_keypoints": "held-out", "gh_kerasma": "dev", "gh_movie_reviews": "held-out",
    "so_31880720": "dev", "so_33969059": "held-out", "so_34311586": "dev", "so_39525358": "held-out",
    "so_44066044": "dev", "so_47352366": "held-out", "so_48221692": "dev", "so_48385830": "held-out",
    "so_48934338": "dev", "so_50306988": "held-out", "so_50481178": "dev", "so_51930566": "held-out",
    "so_52800582": "dev", "so_55328966": "held-out", "so_59278771": "dev", "so_59325381": "held-out",
}


def test_the_split_is_deterministic_and_covers_every_case_once():
    parts = [bench.part(c) for c in bench.CASES]
    assert parts == [bench.part(c) for c in bench.CASES]
    assert set(parts) == set(bench.PARTS)
    chosen = [c.id for p in bench.PARTS for c in bench.CASES if bench.part(c) == p]
    assert sorted(chosen) == sorted(c.id for c in bench.CASES) and len(set(chosen)) == len(chosen)


@pytest.mark.parametrize("round_", bench.ROUNDS)
def test_each_round_alternates_dev_and_held_out_by_id(round_):
    """Within a round, the cases sorted by id alternate dev / held-out, whatever the other rounds hold."""
    ids = sorted(c.id for c in bench.CASES if c.round == round_)
    by_id = {c.id: c for c in bench.CASES}
    assert [bench.part(by_id[i]) for i in ids] == [bench.PARTS[k % 2] for k in range(len(ids))]


# Round 2's split, decided before any of its runs was diagnosed (and then scored): round 3 must not move it.
ROUND_2_PARTS = {
    "gh_gol_nn": "dev", "so_31556268": "held-out", "so_31627380": "dev", "so_34673164": "held-out",
    "so_38648195": "dev", "so_39217567": "held-out", "so_44164749": "dev", "so_45337371": "held-out",
    "so_45442843": "dev",
}
# Round 3's split, fixed with its case list before any of its programs ran.
ROUND_3_PARTS = {
    "d4ml_001": "dev", "d4ml_003": "held-out", "d4ml_038": "dev", "d4ml_086": "held-out", "d4ml_091": "dev",
    "tfpb_gh_ips9": "held-out", "tfpb_so_33641799": "dev", "tfpb_so_35078027": "held-out",
    "tfpb_so_38447935": "dev", "tfpb_so_39939881": "held-out", "tfpb_so_43239467": "dev",
    "tfpb_so_43636736": "held-out", "tfpb_so_46577203": "dev",
}


# Round 4's split, fixed with its case list before any of its programs ran (re-dealt when DeepFD's
# dfd_51181393 joined, before any round-4 run was diagnosed).
ROUND_4_PARTS = {"dfd_51181393": "dev", "umlaut_eval_a": "held-out", "umlaut_eval_b": "dev"}


def test_rounds_1_to_3_keep_their_splits_and_round_4_is_new():
    assert {c.id: bench.part(c) for c in bench.CASES if c.round == 1} == ROUND_1_PARTS
    assert {c.id: bench.part(c) for c in bench.CASES if c.round == 2} == ROUND_2_PARTS
    assert {c.id: bench.part(c) for c in bench.CASES if c.round == 3} == ROUND_3_PARTS
    assert {c.id: bench.part(c) for c in bench.CASES if c.round == 4} == ROUND_4_PARTS
    assert set(bench.ROUNDS) == {1, 2, 3, 4}
    assert not set(ROUND_3_PARTS) & (set(ROUND_1_PARTS) | set(ROUND_2_PARTS))
    assert not set(ROUND_4_PARTS) & (set(ROUND_1_PARTS) | set(ROUND_2_PARTS) | set(ROUND_3_PARTS))


def test_every_round_scored_once_is_open_to_the_remedy_benchmark():
    """Rounds 1-4 have each had their held-out part scored once (docs/external_benchmark.md), so
    the remedy benchmark may diagnose all four."""
    assert set(bench.SCORED_ROUNDS) == {1, 2, 3, 4} <= set(bench.ROUNDS)


def test_round_4_cases_name_their_collection_and_its_duplicates_are_skipped():
    """Each round-4 source names DeepFD or umlaut; DeepFD's programs that earlier rounds hold are skipped."""
    for case in (c for c in bench.CASES if c.round == 4):
        assert case.source.startswith((bench.DFD, bench.UMLAUT)), case.id
        assert case.id.startswith("dfd_" if case.source.startswith(bench.DFD) else "umlaut_"), case.id
    earlier = {c.id for c in bench.CASES if c.round < 4}
    duplicates = [why for why in bench.SKIPPED_R4.values() if "the same program as round" in why]
    assert duplicates
    for why in duplicates:
        assert why.split("round ")[1].split("'s ")[1].split()[0] in earlier, why


def test_round_3_cases_name_their_collection_and_are_not_deeplocalize_programs():
    """Each round-3 source names its repository; a program DeepLocalize also holds is skipped, not ported."""
    for case in (c for c in bench.CASES if c.round == 3):
        assert case.source.startswith((bench.D4ML, bench.TFPB)), case.id
        assert case.id.startswith("d4ml_" if case.source.startswith(bench.D4ML) else "tfpb_"), case.id
    earlier = {c.id for c in bench.CASES if c.round < 3}
    duplicates = [why for why in bench.SKIPPED_R3.values() if "the same program as round 1's" in why]
    assert len(duplicates) >= 5
    for why in duplicates:
        assert why.split("round 1's ")[1].split()[0] in earlier, why


def test_the_round_option_selects_one_round(capsys):
    assert bench.main(["--list", "--round", "2"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")}
    assert listed == {c.id for c in bench.CASES if c.round == 2}


def test_the_remedy_benchmark_reads_only_the_rounds_whose_held_out_part_was_scored(monkeypatch):
    """A round's held-out part must not be diagnosed before it is scored."""
    from bench import remedy as bench_remedy

    def names():
        return {s.name.split("/", 1)[1] for s in bench_remedy.external_runs()}

    scored = {c.id for c in bench.CASES if c.round in bench.SCORED_ROUNDS and c.expected and not c.fixed_task}
    assert names() == scored and any(c.round == 2 for c in bench.CASES if c.id in scored)
    monkeypatch.setattr(bench, "SCORED_ROUNDS", (1,))  # as it stood before round 2's held-out part was scored
    assert names() and names() <= set(ROUND_1_PARTS)


def test_every_case_and_skip_names_a_recorded_source_and_every_source_is_accounted_for():
    assert len(bench.CASES) >= 20 and len({c.id for c in bench.CASES}) == len(bench.CASES)
    ported = {c.source for c in bench.CASES}
    assert ported <= set(bench.SOURCES)
    skipped = {bench.skipped_source(key) for key in bench.SKIPPED}
    assert not ported & skipped and ported | skipped == set(bench.SOURCES)


def test_every_case_expects_findings_the_diagnosis_has():
    for case in bench.CASES:
        assert set(case.expected) <= RULE_NAMES, case.id
    for round_ in bench.ROUNDS:  # most sources of each round show a pathology
        cases = [c for c in bench.CASES if c.round == round_]
        assert sum(bool(c.expected) for c in cases) >= len(cases) - 3, round_


def _run(acc=None, loss=1.0, task="classification", nan=None, prior=None, found=None) -> dict:
    run = {"error": None, "steps": 100, "task": task, "best_val_accuracy": acc, "best_val_loss": loss,
           "first_nonfinite_step": nan, "val_prior_loss": prior}
    if found is not None:
        run["findings"] = [{"name": n, "severity": s} for n, s in found]
    return run


def test_reproduced_means_nan_or_a_clearly_worse_twin_comparison():
    fixed = _run(acc=0.9, loss=0.3)
    assert bench.reproduced(_run(acc=0.5, loss=0.7), fixed)
    assert bench.reproduced(_run(acc=0.89, loss=0.34), fixed)  # loss > 10% above
    assert not bench.reproduced(_run(acc=0.89, loss=0.32), fixed)  # within 2 points and 10%
    assert bench.reproduced(_run(loss=None, nan=40), fixed)
    assert not bench.reproduced(_run(loss=None, nan=40), _run(loss=None, nan=10))  # both went NaN
    # regression: the loss over the val targets' variance, so a twin that rescales its targets compares
    assert not bench.reproduced(_run(loss=100.0, task="regression", prior=1000.0),
                                _run(loss=0.1, task="regression", prior=1.0))
    assert bench.reproduced(_run(loss=500.0, task="regression", prior=1000.0),
                            _run(loss=0.1, task="regression", prior=1.0))


def test_verdicts_named_partial_missed_clean_alarmed_and_not_reproduced():
    case = next(c for c in bench.CASES if c.id == "so_31880720")
    expected = case.expected[0]
    fixed_clean = _run(acc=1.0, loss=0.01, found=[("clip_never_reached", "info")])
    assert bench.verdict(case, _run(acc=0.5, loss=8.0, found=[(expected, "critical")]), fixed_clean) == "named"
    assert bench.verdict(case, _run(acc=0.5, loss=8.0, found=[(expected, "warning")]), fixed_clean) == "named"
    assert bench.verdict(case, _run(acc=0.5, loss=8.0, found=[("oscillating", "warning")]), fixed_clean) == "partial"
    assert bench.verdict(case, _run(acc=0.5, loss=8.0, found=[(expected, "info")]), fixed_clean) == "missed"
    assert bench.verdict(case, _run(acc=1.0, loss=0.01, found=[(expected, "critical")]), fixed_clean) == \
        "not reproduced"
    assert bench.verdict(case, _run(acc=0.5, loss=8.0), _run(acc=1.0, loss=0.01)) == "reproduced"  # no diagnosis
    assert bench.verdict(case, {**_run(acc=0.5), "error": "exit 2: boom"}, fixed_clean) == "error"
    assert bench.twin_verdict(case, fixed_clean) == "clean"
    assert bench.twin_verdict(case, _run(found=[("overfitting", "warning")])) == "alarmed"
    assert bench.twin_verdict(case, _run()) == "trained"
    rows = bench.score([case], {case.id: {"buggy": _run(acc=0.5, loss=8.0, found=[]), "fixed": fixed_clean}})
    assert bench.totals(rows)["missed"] == 1 and bench.totals(rows)["clean"] == 1


def _twin(found=(), prior_ratio=None, dead=None, gap=None, eval_train=None, acc=None, share=None, **extra) -> dict:
    """A twin's evidence as evidence() records it, with findings."""
    return {**_run(acc=acc, loss=0.5, found=list(found)), "prior_ratio": prior_ratio, "dead_share": dead,
            "eval_gap": gap, "eval_train_ratio": eval_train, "val_majority_share": share, **extra}


def test_the_twin_rule_a_learned_twin_must_raise_nothing():
    case = bench.Case("x", "s", "f", "classification", "d", "k", ("diverging",), (), (),
                      twin_sick=("dead_relu",), twin_metric="dead units")
    learned = _twin([("dead_relu", "warning")], prior_ratio=0.4, dead=0.6)
    assert bench.learned(learned)
    # even a twin_sick finding its metric shows is false on a twin that learned
    assert bench.false_alarms(case, learned) == ["dead_relu"] and bench.twin_verdict(case, learned) == "alarmed"
    assert bench.twin_verdict(case, _twin([("dead_relu", "info")], prior_ratio=0.4)) == "clean"
    # learned by accuracy: the majority share plus a clear margin
    assert bench.learned(_twin(prior_ratio=0.95, acc=0.7, share=0.5))
    assert not bench.learned(_twin(prior_ratio=0.95, acc=0.55, share=0.5))
    # the training samples in eval mode above the prior (a batch-norm twin): not learned
    assert not bench.learned(_twin(prior_ratio=0.5, eval_train=3.0))
    # a NaN twin never learned; the source's reported measure counts as learning
    assert not bench.learned({**_twin(prior_ratio=0.1), "first_nonfinite_step": 50})
    at_prior = _twin(prior_ratio=1.0, train_loss_last=0.05)
    assert not bench.learned(at_prior) and bench.learned(at_prior, ("train_loss_last", "<=", 0.1))


def test_the_twin_rule_a_sick_twin_may_carry_only_its_findings_its_metrics_show():
    case = bench.Case("x", "s", "f", "regression", "d", "k", (), (), (), twin_sick=("dead_relu", "plateau_at_prior"),
                      twin_metric="dead units, loss at the prior")
    sick = _twin([("dead_relu", "critical"), ("plateau_at_prior", "critical")], prior_ratio=1.0, dead=0.9)
    assert not bench.learned(sick) and bench.false_alarms(case, sick) == [] and bench.twin_verdict(case, sick) == "sick"
    # a finding the case does not list, or one its metric does not show on this run, is false
    assert bench.false_alarms(case, {**sick, "findings": sick["findings"] + [{"name": "diverging", "severity":
                                                                             "critical"}]}) == ["diverging"]
    unbacked = _twin([("dead_relu", "critical"), ("plateau_at_prior", "critical")], prior_ratio=3.0, dead=0.2)
    assert bench.false_alarms(case, unbacked) == ["dead_relu", "plateau_at_prior"]
    assert bench.twin_verdict(case, unbacked) == "alarmed"
    # a twin whose loss went NaN may carry diverging when its case lists it
    nan_case = bench.Case("z", "s", "f", "regression", "d", "k", (), (), (), twin_sick=("diverging",),
                          twin_metric="NaN")
    nan_twin = {**_twin([("diverging", "critical")]), "first_nonfinite_step": 25, "diverged": 1.0}
    assert bench.twin_verdict(nan_case, nan_twin) == "sick"
    assert bench.twin_verdict(nan_case, {**nan_twin, "first_nonfinite_step": None, "diverged": 0.0}) == "alarmed"
    # a case without twin_sick: any alarm on its twin is false
    plain = bench.Case("y", "s", "f", "regression", "d", "k", (), (), ())
    assert bench.twin_verdict(plain, sick) == "alarmed"


def test_twin_sick_is_set_only_where_the_recorded_twin_does_not_learn_and_names_a_measured_finding():
    for case in bench.CASES:
        assert set(case.twin_sick) <= set(bench.TWIN_SICK_METRIC), case.id
        assert bool(case.twin_sick) == bool(case.twin_metric), case.id


def test_evidence_records_the_twin_measures_and_the_report_totals_each_round(tmp_path):
    run_dir = tmp_path / "fixed"
    run_dir.mkdir()
    (run_dir / "summary.json").write_text(json.dumps({"task": "classification", "steps": 100, "val_prior_loss": 2.0,
                                                       "val_majority_share": 0.2}))
    rows = [{"step": 25, "train/loss": 1.0, "act_dead/a": 0.1, "act_dead/b": 0.7},
            {"step": 50, "train/loss": 0.5, "val/loss": 1.2, "val/accuracy": 0.6, "val/loss_on_train": 1.0,
             "act_dead/b": 0.75}]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    e = bench.evidence(run_dir)
    assert e["dead_share"] == 0.75 and e["dead_layer"] == "b" and e["eval_gap"] == 2.0
    assert e["prior_ratio"] == pytest.approx(0.6) and e["eval_train_ratio"] == pytest.approx(0.5)
    assert bench.learned(e)
    cases = [c for c in bench.CASES if c.id in ("so_31880720", "gh_gol_nn", "d4ml_091")]
    results = {c.id: {"buggy": _run(acc=0.1, loss=9.0, found=[]), "fixed": {**e, "error": None, "findings": []}}
               for c in cases}
    text = bench.report(bench.score(cases, results))
    totals = [line for line in text.splitlines() if line.startswith("totals")]
    assert len(totals) == 3 and all(line.startswith("totals: cases: 1;") for line in totals)
    assert "## Round 1" in text and "## Round 2" in text and "## Round 3" in text and "learned yes" in text


def test_a_critical_finding_announced_live_is_the_twins_alarm_even_when_the_end_drops_it(tmp_path):
    """`--live`: what the live diagnosis announced while the twin trained is an alarm the user saw
    (and that remedy=auto acts on), whatever the end's diagnosis says."""
    run_dir = tmp_path / "fixed"
    run_dir.mkdir()
    live = {"step": 50, "kind": "diagnosis", "finding": "plateau_at_prior", "message": "m", "detail": "d"}
    (run_dir / "summary.json").write_text(json.dumps({"task": "classification", "steps": 100, "max_steps": 100,
                                                       "status": "completed", "val_prior_loss": 2.0,
                                                       "events": [live]}))
    rows = [{"step": s, "kind": "train", "train/loss": 2.0 - s / 100} for s in range(10, 101, 10)]
    rows += [{"step": s, "kind": "eval", "val/loss": 1.9 - s / 100} for s in (50, 100)]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    found = bench.findings(run_dir)
    assert {"name": "plateau_at_prior", "severity": "critical", "live_step": 50} in found
    case = bench.Case("x", "s", "f", "classification", "d", "k", (), (), ())
    twin = {**_twin(prior_ratio=0.4), "findings": found}
    assert bench.false_alarms(case, twin) == ["plateau_at_prior"] and bench.twin_verdict(case, twin) == "alarmed"
    assert "plateau_at_prior (live, step 50)" in bench._shown_alarms(twin)


@pytest.mark.slow  # two whole runs; the scoring it drives is unit-tested above
def test_a_real_invocation_writes_results(tmp_path):
    _sklearn()
    out = tmp_path / "bench"
    cmd = [sys.executable, "-m", "bench.external", "--only", "so_50306988", "--out", str(out),
           "--no-diagnosis"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    (row,) = results["cases"]
    assert row["id"] == "so_50306988" and row["part"] == bench.part(bench.CASES[[c.id for c in bench.CASES].index(
        "so_50306988")])
    assert row["buggy_run"]["steps"] == 35 and row["fixed_run"]["steps"] == 650
    assert row["verdict"] in ("reproduced", "not reproduced") and row["twin"] == "trained"
    assert "findings" not in row["buggy_run"]
    assert (out / "results.md").is_file()


def test_keras_binary_crossentropy_on_float_targets_is_bce_on_the_ports_logits():
    """Keras 2.2: clip p to [eps, 1 - eps], then the cross-entropy; the ports' logits under the
    harness's bce (BCE with logits) give the same loss, a softmax over one unit included."""
    import torch
    from torch.nn import functional as F

    from bench.ports.keras_like import EPSILON, bce_logits

    p = torch.tensor([[0.0, 0.3, 1.0], [0.5, 1e-9, 0.999]], dtype=torch.float64)
    y = torch.tensor([[0.0, 1.0, 0.25], [1.0, 0.0, 1.0]], dtype=torch.float64)
    clipped = p.clamp(EPSILON, 1 - EPSILON)
    keras = -(y * clipped.log() + (1 - y) * (1 - clipped).log()).mean()
    assert torch.allclose(F.binary_cross_entropy_with_logits(bce_logits(p), y), keras)


def test_dfd_51181393_trains_deepfds_subject_form_of_the_program():
    """y = 5x on linspace(1, 2, 100), DeepFD's train_test_split(test_size=0.2, random_state=42); one linear unit;
    the fix is RMSprop's LR only (1e-3 -> 0.1), the same model in both runs."""
    _sklearn()
    import torch

    from bench.ports import dfd_51181393

    train, val = dfd_51181393.build()
    assert len(train) == 80 and len(val) == 20
    for data in (train, val):
        x, y = data.tensors
        assert torch.allclose(y, 5 * x) and float(x.min()) >= 1.0 and float(x.max()) <= 2.0
    assert sum(p.numel() for p in dfd_51181393.Net().parameters()) == 2
    case = next(c for c in bench.CASES if c.id == "dfd_51181393")
    assert "optim.lr=0.001" in case.buggy and "optim.lr=0.1" in case.fixed
    assert [o for o in case.buggy if "lr" not in o] == [o for o in case.fixed if "lr" not in o]


def test_every_case_is_annotated_code_or_config_fix_and_code_fixes_name_lines_of_their_port():
    assert set(bench.FIX_LINES) == {c.id for c in bench.CASES}
    for case_id, fix in bench.FIX_LINES.items():
        assert fix["fix"] in ("code", "config"), case_id
        if fix["fix"] == "code":
            lines = (ROOT / fix["file"]).read_text().splitlines()
            assert fix["lines"] and all(1 <= n <= len(lines) and lines[n - 1].strip() for n in fix["lines"]), case_id


def test_the_fixs_line_is_named_only_when_a_finding_quotes_one_of_its_lines():
    code = next(c for c in bench.CASES if bench.FIX_LINES[c.id]["fix"] == "code")
    config = next(c for c in bench.CASES if bench.FIX_LINES[c.id]["fix"] == "config")
    fix = bench.FIX_LINES[code.id]

    def run(*quoted):
        return {"findings": [{"name": "x", "severity": "warning", "lines": [list(q) for q in quoted]}]}

    assert bench.fix_line(code, run((fix["file"], str(fix["lines"][0])))) == "named"
    assert bench.fix_line(code, run((fix["file"], str(max(fix["lines"]) + 1000)), ("other.py", "3"))) == "not named"
    assert bench.fix_line(config, run(("bench/ports/x.py", "1"))) is None
