"""The diagnosis while the run trains: a new critical finding is reported once, at the eval that
first shows it; with diagnose.abort_on=critical it stops the run, and a sweep records the trial FAIL."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

from apps.sweep_helpers import REPO, load_study, sweep_env
import warm_train
from conftest import compose_cfg, train
from harness.state.checkpoint import step_checkpoints
from harness.core.errors import ConfigError
from harness.modes.run import run

pytestmark = pytest.mark.trajectory  # follows unstable runs: checked under other kernels too (docs/testing.md)

# AdamW at lr 0.5, no clipping, no guard: the loss explodes inside the first log window (×1000),
# then settles on a plateau near chance; nothing goes NaN, so only the diagnosis can tell.
BLOWUP = ["diagnose.report=false", "model=mlp", "data=synthetic", "optim.lr=0.5", "clip=null", "guard=off", "schedule.warmup=0",
          "trainer.max_steps=200", "trainer.log_every=5", "trainer.eval_every=20"]
HEALTHY = ["diagnose.report=false", "model=mlp", "data=synthetic", "optim.lr=3e-3", "trainer.max_steps=200", "trainer.log_every=5",
           "trainer.eval_every=20"]


def diagnosis_events(summary: dict) -> list[dict]:
    return [e for e in summary["events"] if e["kind"] == "diagnosis"]


def test_a_blowup_is_reported_once_when_the_second_eval_confirms_it_and_the_run_goes_on(tmp_path):
    """Critical at the evals of steps 20 and 40: reported at 40, once."""
    _, summary = train(BLOWUP, tmp_path)
    assert summary["status"] == "completed" and summary["steps"] == 200
    events = diagnosis_events(summary)
    assert [(e["step"], e["finding"]) for e in events if e["finding"] == "diverging"] == [(40, "diverging")]
    assert "diverging [critical]" in events[0]["message"]


def test_abort_on_critical_stops_the_run_at_that_eval(tmp_path):
    _, summary = train([*BLOWUP, "diagnose.abort_on=critical"], tmp_path)
    assert summary["status"] == "diverged" and summary["steps"] == 40
    assert summary["reason"].startswith("step 40: diverging [critical]")
    assert summary["stopped_by"] == {"finding": "diverging", "severity": "critical", "step": 40}
    assert step_checkpoints(tmp_path)  # a checkpoint of where it stopped, as for any stop


class Rows:
    """A history the rules read: train rows every 5 steps, an eval row every 20."""

    def __init__(self) -> None:
        self.train: list[dict] = []
        self.evals: list[dict] = []
        self.key_order: list[str] = []

    def up_to(self, step: int, loss=lambda s: 1.0) -> Rows:
        self.train = [{"step": s, "kind": "train", "train/loss": loss(s)} for s in range(5, step + 1, 5)]
        self.evals = [{"step": s, "kind": "eval", "val/loss": 1.0} for s in range(20, step + 1, 20)]
        return self


def test_a_critical_finding_is_reported_only_when_the_eval_before_had_it_too(tmp_path, monkeypatch):
    """A stand-in rule, critical on the rows up to step 40 only: seen at one eval, it is never
    reported; critical from step 80 on, it is reported at 100, the second eval that has it."""
    import harness.diagnosis.live as live
    from harness.diagnosis.findings import Finding, Severity

    def rule(run):
        last = max(row["step"] for row in run.train)
        sick = last == 40 or last >= 80
        return [Finding("stand_in", Severity.CRITICAL, "t", "e", "f")] if sick else []

    monkeypatch.setattr(live, "diagnose", rule)
    monkeypatch.setattr(live, "read_config", lambda run_dir: {})
    history = Rows()
    watcher = live.LiveDiagnosis(tmp_path, history, live.DiagnoseSettings(), set())
    reported = {step: [f.name for f in watcher.new_findings({"steps": step})]
                for step in (20, 40, 60, 80, 100, 120) if history.up_to(step)}
    assert reported == {20: [], 40: [], 60: [], 80: [], 100: ["stand_in"], 120: []}
    nan = live.LiveDiagnosis(tmp_path, Rows().up_to(20, loss=lambda s: math.nan if s == 15 else 1.0),
                             live.DiagnoseSettings(), set())
    monkeypatch.setattr(live, "diagnose", lambda run: [Finding("stand_in", Severity.CRITICAL, "t", "e", "f")])
    assert [f.name for f in nan.new_findings({"steps": 20})] == ["stand_in"]  # the first eval, no second look


def test_abort_on_critical_leaves_a_healthy_run_alone(tmp_path):
    _, summary = train([*HEALTHY, "diagnose.abort_on=critical"], tmp_path)
    assert summary["status"] == "completed" and summary["steps"] == 200 and not diagnosis_events(summary)


def test_live_off_reports_nothing_during_the_run(tmp_path):
    _, summary = train([*BLOWUP, "diagnose.live=false"], tmp_path)
    assert summary["status"] == "completed" and not diagnosis_events(summary)


@pytest.mark.parametrize("bad", ["diagnose.abort_on=warning", "diagnose=maybe", "diagnose.live=2"])
def test_bad_diagnose_settings_are_refused(tmp_path, bad):
    key = bad.split("=")[0]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        run(compose_cfg(["debug=smoke", "logger=none", bad]), run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_sweep_records_the_sick_trial_as_fail_with_the_finding(tmp_path: Path):
    """A grid of two LRs under abort_on: the blow-up stops at its first eval and is FAIL with the
    finding as reason; the healthy trial completes untouched."""
    overrides = [o for o in BLOWUP if not o.startswith("optim.lr")]
    proc = warm_train.run(
        [sys.executable, str(REPO / "train.py"), "-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=grid",
         "optim.lr=choice(0.5,0.003)", *overrides, "diagnose.abort_on=critical", "diagnose.report=false",
         "logger=none", "hydra.sweeper.n_jobs=2", "hydra.sweeper.plots=false", "hydra.sweeper.tensorboard=false",
         f"hydra.sweep.dir={tmp_path}"],
        cwd=REPO, env=sweep_env(), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (REPO / "'").exists()  # the trials' quoted hydra.run.dir made no folder of its own
    trials = {t.params["optim.lr"]: t for t in load_study(tmp_path).trials}
    sick, healthy = trials[0.5], trials[0.003]
    assert sick.state == TrialState.FAIL and "diverging [critical]" in sick.user_attrs["reason"]
    assert json.loads((tmp_path / str(sick.number) / "summary.json").read_text())["steps"] == 40
    assert healthy.state == TrialState.COMPLETE
