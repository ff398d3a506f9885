"""bench/pathology_suite.py: its catalogue, its dev/held-out split, its scoring and one real invocation."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter

import pytest

from conftest import ROOT, compose_cfg
from harness.config.run_config import validate_config

from bench import pathology_suite as suite

pytestmark = pytest.mark.trajectory  # follows unstable runs: checked under other kernels too (docs/testing.md)

CASES = suite.catalogue()


def test_the_held_out_part_is_big_enough_and_spans_the_families():
    held = [c for c in CASES if suite.part_of(c, CASES) == "heldout"]
    assert sum(c.sick for c in held) >= 60 and sum(not c.sick for c in held) >= 20
    options = {o.split("=", 1)[1] for c in held for o in c.overrides if o.startswith("model=")}
    targets = {o.split("=", 1)[1] for c in held for o in c.overrides if o.startswith("model._target_=")}
    assert {"gpt", "mlp", "rnn", "resnet"} <= options
    assert {"bench.suite_models.Net", "bench.suite_models.CharRNN"} <= targets  # user models through model._target_


def test_names_are_unique_and_every_sick_case_says_what_names_it():
    assert len({c.name for c in CASES}) == len(CASES)
    for case in CASES:
        assert case.name.startswith(case.cause + "/")
        assert not case.sick or case.expect or case.mention


def test_every_class_with_several_cases_has_dev_and_held_out_cases():
    parts: dict[str, Counter] = {}
    for case in CASES:
        parts.setdefault(case.cause, Counter())[suite.part_of(case, CASES)] += 1
    for cause, count in parts.items():
        assert count["dev"] >= 1 and count["heldout"] >= 1, cause
        assert count["dev"] <= count["heldout"], cause


def test_the_split_does_not_move_when_another_class_grows():
    extra = suite.Case("diverging/one-more", "diverging", (), ("diverging",))
    grown = [*CASES, extra]
    moved = [c.name for c in CASES if c.cause != "diverging" and suite.part_of(c, CASES) != suite.part_of(c, grown)]
    assert moved == []


@pytest.mark.parametrize("case", CASES[::6], ids=lambda c: c.name)
def test_cases_pass_the_harness_config_checks(case):
    """A case the harness would refuse would score as a miss for the wrong reason."""
    validate_config(compose_cfg(list(case.overrides)))


@pytest.mark.slow  # ~25 s; the catalogue's configs pass the harness's checks in the default suite (above)
def test_scoring_and_a_real_invocation(tmp_path):
    """Four lion cases of the dev part train in their own processes; results.json scores them, and
    --rescore reproduces the score from the run directories alone."""
    out = tmp_path / "suite"
    cmd = [sys.executable, "-m", "bench.pathology_suite", "--part", "dev", "--only", "lion",
           "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    names = {r["name"] for r in results["runs"]}
    assert names == {c.name for c in CASES if "lion" in c.name and suite.part_of(c, CASES) == "dev"}
    by_name = {r["name"]: r for r in results["runs"]}
    for name, r in by_name.items():
        assert r["error"] is None and r["status"] == "completed"
        if name.startswith("healthy/"):
            assert r["ok"] is all(f.endswith(":info") for f in r["findings"])
    slow = by_name["slow_progress/mlp-lion-lr1e-6"]
    assert slow["findings"][0] == "slow_progress:critical" and slow["ok"]
    rows = [json.loads(line) for line in (out / "slow_progress/mlp-lion-lr1e-6/metrics.jsonl").read_text().splitlines()]
    firsts = [r["train/loss_first"] for r in rows if "train/loss_first" in r]
    assert len(firsts) == 1 and abs(firsts[0] - math.log(10)) < 0.1  # the untrained model, read once

    assert "sick runs named" in (out / "results.md").read_text()
    rescored = subprocess.run([*cmd[:-2], "--rescore", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rescored.returncode == 0, rescored.stderr[-3000:]
    assert json.loads((out / "results.json").read_text())["tally"] == results["tally"]


def test_rescoring_a_directory_without_runs_is_a_one_line_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "bench.pathology_suite", "--part", "dev", "--rescore",
                           str(tmp_path / "nothing")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [f"error: --rescore='{tmp_path / 'nothing'}' is invalid: a directory "
                                                "holding runs of the dev part (none found)"]
    assert not (tmp_path / "nothing").exists()


def test_a_case_whose_own_outcome_contradicts_its_cause_is_scored_apart(tmp_path):
    """A `diverging` case that learned and ended near its best did not diverge: it is invalid, with
    its outcome recorded, and left out of the valid score; one whose val loss climbed stays valid."""
    from diagnosis_runs import Run

    learned = Run()
    learned.summary.update(initial_val_loss=2.30)
    worse = Run().set("val/loss", [1.0, 0.8, 1.6, 2.2], kind="eval")
    worse.summary.update(initial_val_loss=2.30)
    case = suite.Case("diverging/test", "diverging", (), expect=("diverging",))
    results = [suite.score(case, learned.write(tmp_path / "learned")), suite.score(case, worse.write(tmp_path / "worse"))]
    assert [r["valid"] for r in results] == [False, True]
    assert results[0]["outcome"].startswith("learned, ended near its best")
    assert suite.tally(results)["valid"] == 1
    text = suite.report(results, "test")
    assert "valid sick runs named: " in text and "- diverging/test: learned, ended near its best" in text
    other = suite.score(suite.Case("dead_relu/test", "dead_relu", (), expect=("dead_relu",)), tmp_path / "learned")
    assert other["valid"]  # a cause its own measures show is never judged by the outcome
