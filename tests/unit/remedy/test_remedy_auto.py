"""diagnose.remedy=auto: a sick run starts again with its finding's remedy, in RUN_DIR/attempts/N/,
and tells the story; a healthy run is never restarted; remedies that do not help stop the run as
sick; a killed attempt resumes exactly; bad values of the new keys are one line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import ROOT, compose_cfg, one_line_error, run_cli, torchrun, train, wait_until
from harness.config.run_config import validate_config
from harness.remedy.judge import ranked_loss
from harness.remedy.story import KEPT, Applied, Attempt, Story

pytestmark = pytest.mark.trajectory  # follows unstable runs: checked under other kernels too (docs/testing.md)

AUTO = ["diagnose.remedy=auto", "diagnose.report=false"]
USER = ["model=mlp", "data=synthetic", "~model.depth", "~model.activation", "~model.norm", "~model.residual",
        "~model.dropout", "~model.width", "trainer.max_steps=300"]  # a user's model: no harness keys


def story(run_dir):
    return json.loads((run_dir / "attempts.json").read_text())


def test_a_diverging_run_restarts_with_a_lower_lr_and_heals(tmp_path):
    objective, summary = train(["experiment=pathology/lr_too_high", *AUTO], tmp_path / "run")
    attempts = story(tmp_path / "run")["attempts"]
    assert [a["status"] for a in attempts[:2]] == ["diverged", "completed"]
    assert attempts[2]["applied"]["search"] == "further" and "optim.lr=0.02" in attempts[2]["overrides"]
    applied = attempts[1]["applied"]
    assert applied["finding"] == "diverging" and attempts[1]["overrides"] == applied["overrides"]
    assert attempts[1]["overrides"][0] == "optim.lr=0.2" and "clip=1.0" in attempts[1]["overrides"]
    assert attempts[1]["base"] == 1 and attempts[1]["outcome"] == "kept"  # better than the run it replaced
    second = json.loads((tmp_path / "run" / "attempts" / "2" / "summary.json").read_text())
    assert summary["remedy_verdict"] == "healed" and summary["best_val_loss"] == second["best_val_loss"] == objective
    assert summary["best_attempt"] == 2
    assert (tmp_path / "run" / "attempts" / "1" / "metrics.jsonl").is_file()  # nothing overwritten
    report = (tmp_path / "run" / "report.md").read_text()
    assert report.startswith("# Remedies: healed")
    assert "`optim.lr=0.2 schedule.warmup=0.05 clip=1.0` for diverging" in report


def test_a_run_measured_by_its_accuracy_ends_with_the_attempt_of_the_best_accuracy(tmp_path):
    """trainer.monitor=val/accuracy: each attempt records the monitor's best, and the run's result is the
    eligible attempt whose best accuracy is the highest (the objective is that accuracy)."""
    objective, summary = train(["experiment=pathology/lr_too_high", "trainer.monitor=val/accuracy", *AUTO],
                               tmp_path / "run")
    attempts = story(tmp_path / "run")["attempts"]
    assert len(attempts) > 1 and all(a["monitor"]["name"] == "val/accuracy" for a in attempts)
    eligible = [a for a in attempts if a.get("outcome") != "rejected" or a.get("finishes") is not None]
    best = max(eligible, key=lambda a: (a["monitor"]["best"] or -1.0, -a["number"]))
    assert summary["best_attempt"] == best["number"] and objective == best["monitor"]["best"]


def test_a_remedy_that_may_continue_restarts_from_the_last_good_checkpoint(tmp_path):
    train(["experiment=pathology/accum_sum", "trainer.ckpt_every=10", "trainer.keep_last=10", *AUTO], tmp_path / "run")
    first, second = story(tmp_path / "run")["attempts"]
    assert second["applied"]["overrides"] == ["accum_reduction=mean"] and second["restart_step"] == 10
    assert second["restart"] == "from step 10 of attempt 1" and second["status"] == "completed"
    rows = [json.loads(line) for line in (tmp_path / "run" / "attempts" / "2" / "metrics.jsonl").open()]
    assert min(r["step"] for r in rows) > 10  # it continued the checkpoint, it did not start over


def test_a_healthy_run_is_never_restarted(tmp_path):
    _, summary = train(["experiment=pathology/healthy", *AUTO], tmp_path / "run")
    assert summary["remedy_verdict"] == "healthy" and len(summary["attempts"]) == 1
    assert not (tmp_path / "run" / "attempts" / "2").exists()


def test_each_kind_of_remedy_is_tried_once_and_the_run_ends_with_its_best_attempt(tmp_path):
    """SGD at an LR 1e6x too high: a 10x lower LR still diverges; the next idea is not another LR
    cut but another kind (AdamW), on top of the attempt that was kept."""
    objective, summary = train(["experiment=pathology/lr_too_high", "optim.lr=20000", *AUTO], tmp_path / "run")
    attempts = summary["attempts"]
    kinds = [a["applied"]["kind"] for a in attempts[1:]]
    assert kinds[:2] == ["lr_down", "optimizer"] and len(set(kinds)) == len(kinds)
    for a in attempts[1:]:
        assert a["overrides"] == [*attempts[a["base"] - 1]["overrides"], *a["applied"]["overrides"]]
    best = attempts[summary["best_attempt"] - 1]
    assert summary["best_val_loss"] == best["best_val_loss"] == objective
    assert all(ranked_loss(best["best_val_loss"]) <= ranked_loss(a["best_val_loss"]) for a in attempts)


def test_a_remedy_that_does_not_help_is_set_aside_and_the_next_starts_where_it_did(tmp_path, monkeypatch):
    """The first candidate (a tiny LR, planted) leaves the sigmoid stack where it was: rejected. The
    next one (the activation swap) builds on the run as given, not on the rejected attempt."""
    import harness.diagnosis.rules.gradients as gradients
    from harness.diagnosis.findings import Remedy, Restart

    real = gradients.clear_gradient_path
    useless = Remedy(("optim.lr=1e-7",), Restart.SCRATCH, "planted: changes nothing that matters", kind="lr_up")
    monkeypatch.setattr(gradients, "clear_gradient_path", lambda run: (useless, *real(run)))
    _, summary = train([*USER, "model._target_=tests.remedy_models.SigmoidStack", *AUTO], tmp_path / "run")
    first, second, third = summary["attempts"][:3]
    assert second["outcome"] == "rejected" and third["base"] == 1 and third["outcome"] == "kept"
    assert third["overrides"] == ["activation_swap=gelu"]  # not on top of the rejected optim.lr=1e-7
    assert summary["best_attempt"] == 3 and summary["remedy_verdict"] == "healed"


def test_a_remedy_the_config_checks_refuse_stops_the_run_as_sick_before_anything_of_it_is_written(tmp_path,
                                                                                                  monkeypatch):
    import harness.diagnosis.rules.curves as curves
    from harness.diagnosis.findings import Remedy, Restart

    refused = Remedy(("model.no_such_key=1",), Restart.CHECKPOINT, "a remedy the config cannot take")
    monkeypatch.setattr(curves, "calmer_updates", lambda *args, **kwargs: (refused,))
    _, summary = train(["experiment=pathology/lr_too_high", *AUTO], tmp_path / "run")
    (attempt,) = summary["attempts"]
    (why,) = summary["remedies_refused"]
    assert summary["remedy_verdict"] == "sick" and why["finding"] == "diverging"
    assert "model.no_such_key" in why["why"]
    assert not (tmp_path / "run" / "attempts" / "2").exists()
    assert "refused by the config checks: `model.no_such_key=1`" in (tmp_path / "run" / "report.md").read_text()


@pytest.mark.slow  # two torchrun attempts on fsdp ranks
def test_under_torchrun_every_rank_follows_rank_0s_verdict_and_a_sharded_checkpoint_is_continued(tmp_path):
    """2 ranks, parallel=fsdp: rank 0 judges each attempt and writes the story; both ranks train the
    next attempt from a copy of the step-10 .dcp checkpoint."""
    torchrun(["experiment=pathology/accum_sum", "parallel=fsdp", "trainer.ckpt_every=10", "trainer.keep_last=10",
              "logger=none", *AUTO, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    first, second = story(tmp_path / "run")["attempts"]
    assert second["applied"]["overrides"] == ["accum_reduction=mean"] and second["restart_step"] == 10
    assert second["status"] == "completed" and story(tmp_path / "run")["verdict"] == "healed"
    assert (tmp_path / "run" / "attempts" / "2" / "checkpoints" / "step_00000010.dcp" / ".metadata").is_file()
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["remedy_verdict"] == "healed"


@pytest.mark.slow  # ~32 s; kill -9 and an exact resume run in the default suite for plain, torchrun and FSDP runs
def test_a_run_killed_during_an_attempt_resumes_it_exactly(tmp_path):
    command = [sys.executable, str(ROOT / "train.py"), "experiment=pathology/lr_too_high", "trainer.max_steps=1500",
               "trainer.ckpt_every=200", "trainer.log_every=50", "trainer.eval_every=500", "logger=none", *AUTO,
               "diagnose.max_attempts=1"]  # the kill falls in attempt 2; the LR search after it is not the point
    straight = subprocess.run([*command, f"hydra.run.dir={tmp_path / 'straight'}"], capture_output=True, text=True)
    assert straight.returncode == 0, straight.stderr[-2000:]
    killed = subprocess.Popen([*command, f"hydra.run.dir={tmp_path / 'killed'}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    second = tmp_path / "killed" / "attempts" / "2" / "checkpoints"
    try:
        wait_until(lambda: list(second.glob("step_*.pt")), "a checkpoint of attempt 2")
    finally:
        killed.kill()  # SIGKILL, mid-attempt
        killed.wait()
    assert list(second.glob("step_*.pt")) and not (tmp_path / "killed" / "attempts" / "2" / "summary.json").exists()
    resumed = subprocess.run([*command, f"hydra.run.dir={tmp_path / 'killed'}", "resume=auto"], capture_output=True,
                             text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    final = [torch.load(d / "attempts" / "2" / "checkpoints" / "step_00001500.pt", weights_only=False)["model"]
             for d in (tmp_path / "straight", tmp_path / "killed")]
    assert all(torch.equal(v, final[1][k]) for k, v in final[0].items())
    assert json.loads((tmp_path / "killed" / "summary.json").read_text())["remedy_verdict"] == "healed"


def test_bad_values_of_the_remedy_keys_are_one_line(tmp_path):
    for override, key in (("diagnose.remedy=yes", "diagnose.remedy"), ("diagnose.max_attempts=0",
                                                                       "diagnose.max_attempts"),
                          ("diagnose.remedy_scope=model", "diagnose.remedy_scope")):
        result = run_cli(["experiment=pathology/healthy", override, f"hydra.run.dir={tmp_path / key}"], cwd=tmp_path)
        assert "is invalid" in one_line_error(result, key) and not (tmp_path / key).exists()


@pytest.mark.slow  # ~18 s; a sweep trial's objective and attributes are also checked for the live diagnosis
def test_a_sweep_trial_reports_its_repaired_objective_and_records_its_remedies(tmp_path):
    import optuna

    sweep = tmp_path / "sweep"
    result = run_cli(["-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=grid", "optim.lr=choice(2.0,0.05)",
                      "experiment=pathology/lr_too_high", "logger=none", *AUTO, "diagnose.max_attempts=2",
                      f"hydra.sweep.dir={sweep}"],
                     cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    trials = {t.params["optim.lr"]: t for t in
              optuna.load_study(study_name=None, storage=f"sqlite:///{sweep / 'optuna.db'}").trials}
    sick, fine = trials[2.0], trials[0.05]
    assert sick.user_attrs["remedy_verdict"] == "healed" and fine.user_attrs["remedy_verdict"] == "healthy"
    assert sick.user_attrs["remedies"][0] == "optim.lr=0.2 schedule.warmup=0.05 clip=1.0"
    assert sick.user_attrs["remedies"][1] == "optim.lr=0.02" and fine.user_attrs["remedies"] == []  # the LR search
    best = json.loads((sweep / str(sick.number) / "summary.json").read_text())["best_attempt"]
    repaired = json.loads((sweep / str(sick.number) / "attempts" / str(best) / "summary.json").read_text())
    assert sick.value == repaired["best_val_loss"]  # the objective is the repaired attempt's


@pytest.mark.parametrize("model, extra, kind, overrides", [
    ("DeadStartNet", [], "init", ["init=kaiming"]),  # units dead from the first step: the author's init
    ("SigmoidStack", [], "activation", ["activation_swap=gelu"]),  # a hand-written deep sigmoid stack
    ("SigmoidHeadRegressor", ["data.task=regression", "trainer.max_steps=150"], "output",
     ["output_activation=identity"]),  # a regression output that cannot leave (0, 1)
    ("DeadStartNet", ["+model.depth=2", "init=kaiming", "optim=sgd", "optim.lr=0.5", "optim.momentum=0.99", "clip=null",
                      "schedule=constant", "guard=off"], "optimizer", ["optim=adamw", "optim.lr=0.001"]),
])
def test_a_user_model_is_repaired_by_a_remedy_that_works_on_any_module(tmp_path, model, extra, kind, overrides):
    """No harness keys in the model: the init group, the activation swap, the output activation and
    the optimizer switch work on any nn.Module, and the report says when a remedy changed the model."""
    _, summary = train([*USER, f"model._target_=tests.remedy_models.{model}", *extra, *AUTO], tmp_path / "run")
    second = summary["attempts"][1]
    assert second["applied"]["kind"] == kind and second["applied"]["overrides"] == overrides
    assert second["outcome"] == "kept" and summary["remedy_verdict"] == "healed" and summary["best_attempt"] == 2
    assert ("(changes the model)" in (tmp_path / "run" / "report.md").read_text()) is (kind != "optimizer")


def test_remedy_scope_training_never_changes_the_model_and_the_run_as_given_is_finished(tmp_path):
    """Only the LR may change; it cannot revive units dead from their init, so it is rejected. The run
    as given, stopped early by its finding to try it, is then trained to its end: with remedies the
    run ends no worse than without them."""
    overrides = [*USER, "model._target_=tests.remedy_models.DeadStartNet", "trainer.eval_every=50"]
    _, without = train(overrides, tmp_path / "without")
    _, summary = train([*overrides, "diagnose.remedy_scope=training", *AUTO], tmp_path / "run")
    first, second, last = summary["attempts"]
    assert first["steps"] < 300 and second["applied"]["kind"] == "lr_down" and not second["applied"]["changes_model"]
    assert second["outcome"] == "rejected"  # the init was the cause: a lower LR cannot fix it
    assert last["finishes"] == 1 and last["restart_step"] == first["steps"] and last["steps"] == 300
    assert summary["remedy_verdict"] == "unchanged" and summary["best_attempt"] in (1, 3)
    assert summary["best_val_loss"] <= without["best_val_loss"]


def test_a_story_written_before_it_was_typed_reads_and_writes_back_the_same():
    """attempts.json of runs already on disk: a resume reads it, and writes it back unchanged."""
    told = {"max_attempts": 3, "verdict": "healed", "best_attempt": 2, "attempts": [
        {"number": 1, "overrides": [], "restart": "as given", "restart_checkpoint": None, "restart_step": None,
         "status": "sick", "steps": 200, "best_val_loss": 2.3, "best_val_accuracy": 0.1, "final_train_loss": 2.31,
         "critical": ["diverging"], "learned": False},
        {"number": 2, "overrides": ["optim.lr=0.1"], "restart": "from step 100 of attempt 1",
         "restart_checkpoint": "/r/attempts/1/checkpoints/step_00000100.pt", "restart_step": 100, "base": 1,
         "applied": {"finding": "diverging", "overrides": ["optim.lr=0.1"], "restart": "checkpoint", "why": "lower",
                     "before_step": 150, "kind": "lr_down", "changes_model": False},
         "status": "completed", "steps": 300, "best_val_loss": 0.9, "best_val_accuracy": None,
         "final_train_loss": 0.8, "critical": [], "learned": True, "outcome": "kept"}],
        "refused": [{"finding": "diverging", "overrides": ["precision=fp16"], "why": "error: ..."}]}
    story = Story.from_json(told)
    assert story.attempts[1].applied.idea == "lr_down" and story.attempts[1].kept and story.remedies_applied == 1
    assert story.to_json() == told


def test_the_verdict_needs_a_better_attempt_without_critical_findings_that_learned():
    from harness.remedy.judge import conclude

    def story(*attempts):
        return Story(5, [Attempt(i, [], "", best_val_loss=loss, critical=critical, learned=learned)
                         for i, (loss, critical, learned) in enumerate(attempts, 1)])

    cases = [(story((2.3, ["dead_relu"], False), (1.2, [], True)), "healed", 2),
             (story((2.3, ["dead_relu"], False), (2.29, [], False)), "sick", 2),  # no critical, but at chance
             (story((1.0, ["diverging"], True), (None, ["diverging"], False)), "unchanged", 1),  # never worse
             (story((2.3, ["dead_relu"], False), (1.9, ["dead_relu"], True)), "sick", 2),
             (story((0.5, [], True)), "healthy", 1)]
    for told, verdict, best in cases:
        conclude(told)
        assert (told.verdict, told.best_attempt) == (verdict, best)


def test_a_code_change_verdict_keeps_the_run_as_given_finished_to_its_end():
    """A cause only an edit reaches, on a run its live finding stopped at step 24: nothing is tried,
    the run as given is trained to its end, and that is the result; the verdict stays the code change."""
    from harness.remedy.judge import conclude

    stopped = Attempt(1, [], "as given", steps=24, best_val_loss=9.5, critical=["diverging"],
                      code=["model.py:32"])
    finished = Attempt(2, [], "from step 20 of attempt 1, to its end", base=1, finishes=1, steps=120,
                       best_val_loss=2.3, critical=["diverging"])
    story = Story(3, [stopped, finished])
    conclude(story)
    assert (story.verdict, story.best_attempt) == ("needs a code change", 2)


def test_where_the_user_named_a_monitor_the_result_is_the_attempt_with_its_best_value():
    """trainer.monitor=val/f1: among the attempts that may be the result, the largest best F1 wins,
    though another has the lower val loss; a rejected remedy still never is the result."""
    from harness.remedy.judge import best

    def f1(value):
        return {"name": "val/f1", "mode": "max", "best": value, "best_step": 100}

    story = Story(5, [Attempt(1, [], "as given", best_val_loss=0.40, monitor=f1(0.61)),
                      Attempt(2, ["optim.lr=0.01"], "from scratch", best_val_loss=0.35, base=1, outcome="kept",
                              monitor=f1(0.58)),
                      Attempt(3, ["clip=1.0"], "from scratch", best_val_loss=0.38, base=2, outcome="kept",
                              monitor=f1(0.66)),
                      Attempt(4, ["optim.lr=0.001"], "from scratch", best_val_loss=0.30, base=3, outcome="rejected",
                              monitor=f1(0.90))])
    assert best(story).number == 3
    story.attempts[2].monitor = f1(None)  # no finite F1 ranks last
    assert best(story).number == 1
    assert Story.from_json(json.loads(json.dumps(story.to_json()))).attempts[0].monitor == f1(0.61)


def test_a_rejected_remedy_is_never_the_result_and_a_stopped_base_is_finished_instead(tmp_path):
    """The live diagnosis stopped the run as given at step 200; the remedy trained 1000 steps to a
    hair below it, but was not better where both had trained (rejected): the result is the run
    as given, finished to its end, not the rejected attempt (which ended above remedy=off)."""
    from harness.remedy.judge import best
    from harness.remedy.policy import finish_best

    story = Story(5, [Attempt(1, [], "as given", best_val_loss=1188.87, critical=["unnormalised_inputs"]),
                      Attempt(2, ["data.standardize=true"], "from scratch", best_val_loss=1188.79, critical=[], base=1,
                              outcome="rejected")])
    assert best(story).number == 1
    first = tmp_path / "attempts" / "1"
    (first / "checkpoints").mkdir(parents=True)
    stopped_by = {"finding": "unnormalised_inputs", "severity": "critical", "step": 200}
    (first / "summary.json").write_text(json.dumps({"stopped_by": stopped_by, "steps": 200, "max_steps": 1000}))
    torch.save({"step": 200}, first / "checkpoints" / "step_00000200.pt")
    following = finish_best(story, tmp_path)
    assert following is not None and following.finishes == 1 and following.overrides == []


def test_the_run_as_given_stopped_early_is_finished_before_it_can_lose_then_a_stopped_result(tmp_path):
    """A live critical stopped the run as given; a kept remedy, also stopped early, has the lower
    best: the run as given is carried to its end first (the result must not end worse than it),
    then the best attempt; once both are finished nothing follows."""
    from harness.remedy.policy import finish_best

    story = Story(5, [Attempt(1, [], "as given", best_val_loss=1.9, critical=["diverging"]),
                      Attempt(2, ["optim.lr=0.01"], "from scratch", best_val_loss=1.2, base=1, outcome=KEPT)])
    for number in (1, 2):
        folder = tmp_path / "attempts" / str(number)
        (folder / "checkpoints").mkdir(parents=True)
        stopped_by = {"finding": "diverging", "severity": "critical", "step": 100 * number}
        (folder / "summary.json").write_text(json.dumps({"stopped_by": stopped_by, "steps": 100 * number,
                                                         "max_steps": 1000}))
        torch.save({"step": 100 * number}, folder / "checkpoints" / f"step_{100 * number:08d}.pt")
    first = finish_best(story, tmp_path)
    assert (first.finishes, first.overrides, first.restart_step) == (1, [], 100)
    story.attempts.append(first)
    then = finish_best(story, tmp_path)
    assert (then.finishes, then.overrides, then.restart_step) == (2, ["optim.lr=0.01"], 200)
    story.attempts.append(then)
    assert finish_best(story, tmp_path) is None


def test_healed_needs_the_learned_outcome_not_a_result_at_the_prior(tmp_path):
    """Two balanced classes: a best val loss of 0.694 against a prior of 0.693 beat the untrained
    model but not the prior, so the run did not learn, whatever its findings."""
    from diagnosis_runs import Run
    from harness.diagnosis import load_run
    from harness.remedy.judge import learned

    at_prior = Run().set("val/loss", [0.75, 0.70, 0.695, 0.694], kind="eval")
    at_prior.summary.update(initial_val_loss=0.80, val_prior_loss=0.693)
    assert not learned(load_run(at_prior.write(tmp_path / "prior")))
    below = Run().set("val/loss", [0.75, 0.6, 0.5, 0.45], kind="eval")
    below.summary.update(initial_val_loss=0.80, val_prior_loss=0.693)
    assert learned(load_run(below.write(tmp_path / "below")))


def test_a_kept_lr_move_is_followed_by_the_same_factor_and_an_overshoot_is_halved_once():
    """An LR cut that measurably helped names the LR as the cause: the next attempt cuts it by the
    same factor again, from the same point; a 10x step that did not help overshot, so the geometric
    midpoint is tried once; after the midpoint the search ends. A move that did not help, or a
    remedy of another kind, starts no search; a training change of another kind the findings still
    name (AdamW for SGD) comes before the search, and so does a finding that moves the LR the other
    way."""
    from harness.remedy.policy import next_attempt
    from harness.diagnosis.findings import Finding, Remedy, Restart, Severity

    cfg = validate_config(compose_cfg(["optim=sgd", "optim.lr=2.0"]))
    given = Attempt(1, [], "as given")
    cut = Attempt(2, ["optim.lr=0.2", "clip=1.0"], "from scratch", base=1, outcome="kept",
                  applied=Applied("diverging", ["optim.lr=0.2", "clip=1.0"], kind="lr_down"))
    story = Story(5, [given, cut])

    def following(attempt, current, findings=()):
        return next_attempt(cfg, story, attempt, current, Path("unused"), list(findings), "all", 1)

    further = following(cut, cut)
    assert further.overrides == ["clip=1.0", "optim.lr=0.02"] and further.base == 2
    assert further.applied.search == "further" and further.applied.kind == "lr_down"
    assert further.restart == "from scratch"

    further.outcome = "rejected"
    story.attempts.append(further)
    midpoint = following(further, cut)
    assert midpoint.overrides == ["clip=1.0", "optim.lr=0.0632"] and midpoint.base == 2
    assert midpoint.applied.search == "midpoint"
    midpoint.outcome = "rejected"
    story.attempts.append(midpoint)
    assert following(midpoint, cut) is None  # the search is over and no finding names anything else

    story.attempts[2:] = []
    cut.outcome = "rejected"
    assert following(cut, given) is None  # a cut that did not help starts no search
    cut.outcome, cut.applied.kind = "kept", "clip"
    assert following(cut, cut) is None  # nor does a remedy of another kind
    cut.applied.kind = "lr_down"
    switch = Remedy(("optim=adamw", "optim.lr=0.001"), Restart.SCRATCH, "AdamW", kind="optimizer")
    still = Finding("diverging", Severity.CRITICAL, "still diverging", "", "", (switch,))
    assert following(cut, cut, [still]).applied.kind == "optimizer"
    # the cut cured the divergence and the run now learns far too slowly: its own finding (an info
    # here) raises the LR, and that comes before cutting it once more
    raise_lr = Remedy(("optim.lr=0.6",), Restart.SCRATCH, "3x larger updates", kind="lr_up")
    slow = Finding("slow_progress", Severity.INFO, "learning far too slowly", "", "", (raise_lr,))
    cut.status = "completed"
    up = following(cut, cut, [slow])
    assert up.applied.kind == "lr_up" and "optim.lr=0.6" in up.overrides and up.applied.search is None
    assert following(cut, cut, []).applied.search == "further"  # without that finding the search goes on


def test_a_kept_jump_to_the_edge_of_the_optimizers_range_is_followed_by_a_10x_step_not_the_whole_jump_again():
    """Adam at lr 100 went to 10x its usual LR at once (1e4x) and that helped: the search goes on 10x
    further, to its usual 1e-3, not to 1e-6."""
    from harness.remedy.policy import next_attempt

    cfg = validate_config(compose_cfg(["optim=adam", "optim.lr=100.0"]))
    jump = Attempt(2, ["optim.lr=0.01", "clip=1.0"], "from scratch", base=1, outcome="kept",
                   applied=Applied("diverging", ["optim.lr=0.01", "clip=1.0"], kind="lr_down"))
    story = Story(5, [Attempt(1, [], "as given"), jump])
    further = next_attempt(cfg, story, jump, jump, Path("unused"), [], "all", 1)
    assert further.overrides == ["clip=1.0", "optim.lr=0.001"] and further.applied.search == "further"


def test_a_remedy_rejected_where_its_base_stopped_early_is_kept_if_it_ends_better_than_the_finished_base():
    """The base stopped at step 48 for a remedy; the remedy (from scratch) trailed there and was
    rejected, then ended at 2.08. Finished, the run as given ends at 2.24: the remedy is kept at
    the end and is the result. One that ends only 0.5% better stays rejected."""
    from harness.remedy.judge import best, rejudge_at_the_end

    def told(remedy_loss):
        return Story(5, [
            Attempt(1, [], "as given", best_val_loss=2.243, steps=48, critical=["vanishing_gradients"]),
            Attempt(2, ["activation_swap=gelu"], "", best_val_loss=remedy_loss, steps=150, critical=[], base=1,
                    outcome="rejected"),
            Attempt(3, ["init=xavier"], "", best_val_loss=2.0, steps=48, critical=["x"], base=1,
                    outcome="rejected"),  # stopped early itself: not comparable at the end
            Attempt(4, [], "", best_val_loss=2.238, steps=150, critical=[], base=1, finishes=1, outcome="rejected")])

    better, hair = told(2.078), told(2.227)
    for story in (better, hair):
        rejudge_at_the_end(story, story.attempts[3], noise=0.005)
    assert better.attempts[1].outcome == "kept at the end" and best(better).number == 2
    assert better.attempts[2].outcome == "rejected"
    assert hair.attempts[1].outcome == "rejected" and best(hair).number == 4


def test_an_attempt_is_judged_by_ratios_against_its_bases_noise():
    """A base that swung between 0.2 and 7 (a port of a published regressor, Adam at lr 0.1) is
    beaten by a remedy that reaches 0.001, though its absolute wobble (1.27) is larger than its best;
    one that only reaches 0.15 beats it by pairing (lower at every eval), not by the noise band: with
    one eval above the base it does not. A steady base is not beaten by a remedy within its noise, at
    any scale."""
    from harness.diagnosis.load import RunData
    from harness.remedy.judge import better

    def run(*val):
        return RunData(Path("run"), {}, {}, [], [{"step": 100 * (i + 1), "val/loss": v} for i, v in enumerate(val)])

    oscillating = run(7.41, 2.52, 1.29, 0.702, 0.574, 0.37, 2.01, 0.202, 7.16, 1.24)
    assert better(run(0.146, 0.00109, 0.00102, 0.000978, 0.000963, 0.000935, 0.000941, 6750.0, 3.51, 0.803),
                   oscillating)
    assert better(run(2.0, 1.0, 0.6, 0.4, 0.3, 0.25, 0.2, 0.18, 0.16, 0.15), oscillating)
    assert not better(run(2.0, 1.0, 0.6, 0.4, 0.3, 0.25, 0.2, 0.25, 0.16, 0.15), oscillating)
    # the LR search's next step on that port: 10% lower than a base that blew up after its best, and
    # clean: within the base's noise, but it cleared its critical finding, so it is kept
    blew_up = run(0.00106, 0.00138, 0.00107, 0.000977, 0.000914, 0.000879, 0.000846, 6750.0, 3.51, 0.803)
    clean = run(0.00106, 0.00138, 0.00107, 0.000977, 0.000914, 0.000879, 0.000846, 0.000857, 0.000904, 0.000935)
    assert not better(clean, blew_up) and better(clean, blew_up, cleared=True)
    assert not better(run(*(1.01 * v for v in clean.series("val/loss", kind="eval").values)), blew_up, cleared=True)
    for scale in (1.0, 1e-6, 1e6):
        steady = run(*(scale * v for v in (1.0, 0.8, 0.7, 0.62, 0.6, 0.61, 0.59, 0.6)))
        assert not better(run(*(scale * v for v in (1.0, 0.8, 0.7, 0.62, 0.6, 0.6, 0.585, 0.59))), steady)
        assert better(run(*(scale * v for v in (1.0, 0.7, 0.5, 0.45, 0.4, 0.41, 0.4, 0.4))), steady)


def test_a_remedy_below_a_noisy_base_at_every_shared_eval_is_better():
    """A port's base (raw inputs standardised, a ReLU output under binary cross-entropy) is best at
    its first eval and climbs as it overfits, so its noise band is wide (its best 0.279 needs a
    25% lead); the remedy (a sigmoid output) ends at 0.21 and is lower at each of the ten evals. A
    remedy above the base at one eval, or lower at four shared evals only, is not better by pairing."""
    from harness.diagnosis.load import RunData
    from harness.remedy.judge import better

    def run(*val):
        return RunData(Path("run"), {}, {}, [], [{"step": 2000 * (i + 1), "val/loss": v} for i, v in enumerate(val)])

    base = run(0.279, 0.36, 0.369, 0.41, 0.362, 0.459, 0.485, 0.527, 0.499, 0.772)
    remedy = (0.227, 0.233, 0.21, 0.234, 0.214, 0.227, 0.232, 0.229, 0.239, 0.261)
    assert better(run(*remedy), base)
    assert not better(run(*remedy[:2], 0.38, *remedy[3:]), base)  # above the base at one eval
    assert not better(run(*remedy[:4]), run(0.279, 0.41, 0.30, 0.52))  # lower at four evals only, within the noise


def _finding(name: str, severity: str, override: str, kind: str):
    """A finding of `severity` whose one remedy, from scratch, is `override`."""
    from harness.diagnosis.findings import Finding, Remedy, Restart, Severity

    return Finding(name, Severity(severity), name, "", "", (Remedy((override,), Restart.SCRATCH, name, kind=kind),))


def test_a_run_that_finished_with_a_warning_tries_its_remedies_and_a_stopped_one_only_its_criticals():
    """A warning never stops a run; one that ran to its end with a warning that names a remedy (a
    run still falling slowly at the end) gets that remedy tried, judged like any other. A run a
    critical finding stopped acts on the critical one only."""
    from harness.remedy.policy import next_candidate

    cfg = validate_config(compose_cfg(["optim.lr=1e-4"]))
    slow = _finding("slow_progress", "warning", "optim.lr=0.001", "lr_up")
    bursts = _finding("exploding_gradients", "critical", "clip=1.0", "clip")
    given = Attempt(1, [], "as given", status="completed")
    story = Story(3, [given])

    def following(findings):
        return next_candidate(cfg, story, given, Path("unused"), findings, "all", 1)

    assert following([slow]).overrides == ["optim.lr=0.001"]
    assert following([slow, bursts]).overrides == ["clip=1.0"]  # a critical finding comes first
    given.status = "sick"  # stopped by a critical finding: its warnings wait
    assert following([slow]) is None


def test_once_a_remedy_was_tried_a_finished_attempts_infos_are_tried_after_its_warnings():
    """A run as given whose findings are infos alone is never restarted. Once a remedy repaired a
    sick run (a one-unit softmax made a sigmoid), the latent cause it still carries (raw inputs, an
    info on a run that learned) is tried, after any warning's candidate, and not while an LR search
    is in progress."""
    from harness.diagnosis.findings import Remedy, Restart
    from harness.remedy.policy import next_candidate

    cfg = validate_config(compose_cfg(["optim.lr=1e-4"]))
    raw = _finding("unnormalised_inputs", "info", "data.standardize=true", "inputs")
    slow = _finding("slow_progress", "warning", "optim.lr=0.001", "lr_up")
    given = Attempt(1, [], "as given", status="completed")
    story = Story(3, [given])
    assert next_candidate(cfg, story, given, Path("unused"), [raw], "all", 1) is None
    sigmoid = Remedy(("output_activation=sigmoid",), Restart.SCRATCH, "sigmoid", kind="output")
    given.status, given.critical = "sick", ["output_activation"]
    repaired = Attempt(2, ["output_activation=sigmoid"], "from scratch", base=1, status="completed", outcome=KEPT,
                       applied=Applied.of("output_activation", sigmoid))
    story.attempts.append(repaired)

    def following(findings, latent=True):
        return next_candidate(cfg, story, repaired, Path("unused"), findings, "all", 1, latent=latent)

    assert following([raw]).overrides == ["output_activation=sigmoid", "data.standardize=true"]
    assert following([raw, slow]).overrides == ["output_activation=sigmoid", "optim.lr=0.001"]  # the warning first
    assert following([raw], latent=False) is None
    repaired.status = "sick"  # stopped by a critical finding: only critical ones are acted on
    assert following([raw]) is None


def test_an_adam_lr_1000x_too_high_goes_to_the_edge_of_its_range_and_the_search_goes_on_from_there(tmp_path):
    """Adam at lr 1.0 on a user's net (no harness keys): a 10x cut would leave it 100x above Adam's
    usual 1e-3, so the cut goes at once to 10x that, the edge of its range (kept, healthy); the
    search then steps 10x further (rejected: too slow) and tries the midpoint once."""
    _, summary = train([*USER, "model._target_=tests.remedy_models.DeadStartNet", "+model.depth=2", "init=kaiming",
                        "optim=adam", "optim.lr=1.0", "schedule=constant", "clip=null", "guard=off", *AUTO],
                       tmp_path / "run")
    given, cut, further, midpoint, *rest = summary["attempts"]
    assert cut["applied"]["kind"] == "lr_down" and cut["outcome"] == "kept" and "optim.lr=0.01" in cut["overrides"]
    assert further["applied"]["search"] == "further" and further["base"] == cut["number"]
    assert "optim.lr=0.001" in further["overrides"] and further["outcome"] == "rejected"
    assert midpoint["applied"]["search"] == "midpoint" and "optim.lr=0.00316" in midpoint["overrides"]
    best = summary["attempts"][summary["best_attempt"] - 1]
    assert summary["remedy_verdict"] == "healed" and best["applied"]["kind"] == "lr_down" and not best["critical"]
    assert ranked_loss(summary["best_val_loss"]) < ranked_loss(given["best_val_loss"]) / 2


def test_splits_prepared_differently_are_named_and_no_training_change_is_tried(tmp_path):
    """Labels divided by 255 with the pixels (every training label class 0), the validation split
    left raw: the fix is in the user's data code, so no init, LR or activation is tried on it."""
    _, summary = train([*USER, "data=custom", "data._target_=tests.user_code.labels_scaled_with_pixels", "data.num_classes=10",
                        "trainer.max_steps=100", "trainer.eval_every=25", *AUTO], tmp_path / "run")
    assert not any(a.get("applied") for a in summary["attempts"])
    assert "split_mismatch" in summary["attempts"][0]["critical"] and summary["remedy_verdict"] != "healed"
    contrast = json.loads((tmp_path / "run" / "attempts" / "1" / "summary.json").read_text())["split_contrast"]
    assert contrast["train_classes"] == 1 and contrast["val_classes"] == 10
    assert contrast["val_over_train_input_norm"] > 100
