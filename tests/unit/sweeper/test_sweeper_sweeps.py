"""Whole sweeps of the fake app (tests/apps/fake_app.py), started like a user starts them:
`python app.py -m hydra/sweeper=optuna ...` in a subprocess. Each trial takes well under 1 s."""
from __future__ import annotations

import itertools
import json
import signal
from pathlib import Path

import optuna
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from apps.sweep_helpers import held, load_study, run_sweep, start_sweep
from conftest import wait_until
from hydra_plugins.harness_optuna_sweeper._test_best import score_best_trial
from harness.launch.runner import AppCommand

DONE = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
NO_APP = AppCommand(python="/nonexistent/python", entry=(), args=(), cwd="/")  # starting it would raise


def summaries(sweep_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(sweep_dir.glob("*/summary.json"))]


def max_concurrency(spans: list[tuple[float, float]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    return max(itertools.accumulate(delta for _, delta in events))


def test_grid_runs_every_combination_once_two_at_a_time(tmp_path: Path) -> None:
    """Also the trial-runner seam: a custom runner wraps the command and sets per-slot env."""
    run_sweep(tmp_path, "hydra/sweeper/sampler=grid", "optim=choice(adamw,sgd)",
              "clip=choice(0.5,1.0)", "hydra.sweeper.n_jobs=2", "sleep_s=1.5",  # > the two starts' skew under load
              "hydra.sweeper.runner._target_=slot_runner.SlotRunner")
    trials = load_study(tmp_path).trials
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 4
    assert sorted((t.params["optim"], t.params["clip"]) for t in trials) == [
        ("adamw", 0.5), ("adamw", 1.0), ("sgd", 0.5), ("sgd", 1.0)]
    runs = summaries(tmp_path)
    assert max_concurrency([(r["started_at"], r["ended_at"]) for r in runs]) == 2
    assert {r["env"]["FAKE_SLOT"] for r in runs} == {"0", "1"}
    assert {r["env"]["FAKE_WRAPPED"] for r in runs} == {"1"}
    assert sorted(r["job_num"] for r in runs) == [0, 1, 2, 3]
    result = json.loads((tmp_path / "sweep_summary.json").read_text())
    assert result["counts"]["COMPLETE"] == 4
    assert result["best_trial"]["params"] == {"optim": "adamw", "clip": 0.5}
    assert (tmp_path / "trials.csv").read_text().count("\n") == 5


def test_crash_divergence_nan_and_timeout_fail_with_reasons(tmp_path: Path) -> None:
    run_sweep(tmp_path, "hydra/sweeper/sampler=grid", "mode=ok,nan_loss,crash,diverge,hang",
              "hydra.sweeper.n_jobs=2", "hydra.sweeper.runner.timeout_s=2")
    reasons = {t.params["mode"]: (t.state, t.user_attrs["reason"]) for t in load_study(tmp_path).trials}
    assert reasons["ok"] == (TrialState.COMPLETE, None)
    assert reasons["nan_loss"] == (TrialState.FAIL, "objective is NaN")
    assert reasons["crash"] == (TrialState.FAIL, "exit code 1: RuntimeError: simulated crash")
    assert reasons["diverge"] == (TrialState.FAIL, "diverged: loss became NaN at step 3")
    assert reasons["hang"][0] == TrialState.FAIL and reasons["hang"][1].startswith("timeout")
    result = json.loads((tmp_path / "sweep_summary.json").read_text())
    assert result["best_trial"]["params"] == {"mode": "ok"}
    assert result["counts"] == {"COMPLETE": 1, "FAIL": 4, "done": 5, "interrupted": 0}


def test_pruner_stops_bad_learning_rates_early(tmp_path: Path) -> None:
    run_sweep(tmp_path, "hydra/sweeper/sampler=random", "hydra.sweeper.seed=0",
              "hydra/sweeper/pruner=median", "hydra.sweeper.pruner.n_startup_trials=2",
              "hydra.sweeper.n_trials=4", "evals=3",
              "optim.lr=tag(log,interval(1e-6,1e-1))")
    trials = load_study(tmp_path).trials
    assert all(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in trials)
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert pruned and complete
    assert all(max(t.intermediate_values) == 10 for t in pruned)  # stopped at the first eval
    assert all(len(t.intermediate_values) == 3 for t in complete)
    # The log-tagged interval is stored as a log distribution, and sampled within its bounds.
    assert {t.distributions["optim.lr"] for t in trials} == {FloatDistribution(1e-6, 1e-1, log=True)}
    assert all(1e-6 <= t.params["optim.lr"] <= 1e-1 for t in trials)


def test_ctrl_c_stops_cleanly_and_the_same_command_resumes(tmp_path: Path) -> None:
    """Ctrl-C while trial 0 has finished and trials 1 and 2 are held at the gate: mid-sweep for
    as long as the test needs, however fast or slow the machine."""
    gate = tmp_path / "gate"
    args = ("hydra/sweeper/sampler=random", "hydra.sweeper.seed=0", "hydra.sweeper.n_trials=4",
            "hydra.sweeper.n_jobs=2", "x=interval(0,1)", f"gate={gate}", "gated_from=1")
    sweep = start_sweep(tmp_path, *args)
    wait_until(lambda: held(tmp_path, 2), "trial 0 done and two trials held at the gate")
    sweep.send_signal(signal.SIGINT)
    out, _ = sweep.communicate(timeout=60)
    assert sweep.returncode == 130, out
    first = load_study(tmp_path).trials
    assert not [t for t in first if t.state == TrialState.RUNNING]
    assert [t.state for t in first if t.number == 0] == [TrialState.COMPLETE]
    interrupted = [t for t in first if t.user_attrs.get("reason") == "interrupted"]
    assert {1, 2} <= {t.number for t in interrupted} and all(t.state == TrialState.FAIL for t in interrupted)

    gate.touch()
    run_sweep(tmp_path, *args)
    trials = load_study(tmp_path).trials
    done = [t for t in trials if t.state in DONE and t.user_attrs.get("reason") != "interrupted"]
    assert len(done) == 4 and 0 in {t.number for t in done}  # trial 0 counted, not run again
    assert [t.number for t in trials] == list(range(len(trials)))  # numbering continued


def test_killed_grid_sweep_resumes_without_losing_or_repeating_a_combination(tmp_path: Path) -> None:
    """The search space comes from a preset (hparams_search/fake_grid.yaml: 2 x 2, n_jobs=2)."""
    gate = tmp_path / "gate"
    args = ("+hparams_search=fake_grid", f"gate={gate}", "gated_from=1")
    sweep = start_sweep(tmp_path, *args)
    wait_until(lambda: held(tmp_path, 2), "trial 0 done and two trials held at the gate")
    sweep.kill()  # SIGKILL: no chance to clean up, trials are left RUNNING
    sweep.wait(timeout=30)

    gate.touch()
    rerun = run_sweep(tmp_path, *args)
    assert "left running by a killed sweep" in rerun.stdout + rerun.stderr
    trials = load_study(tmp_path).trials
    assert any(t.user_attrs.get("reason") == "interrupted" for t in trials)
    done = [t for t in trials if t.state in DONE and t.user_attrs.get("reason") != "interrupted"]
    combos = [(t.params["optim"], t.params["clip"]) for t in done]
    assert sorted(combos) == sorted(itertools.product(["adamw", "sgd"], [0.5, 1.0]))
    assert all(t.state == TrialState.COMPLETE for t in done)
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]


def test_bad_sweeper_setting_is_one_line_naming_key_value_and_choices(tmp_path: Path) -> None:
    proc = run_sweep(tmp_path, "hydra.sweeper.sampler.name=bayes", "x=interval(0,1)", expect_rc=2)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "hydra.sweeper.sampler.name='bayes'" in lines[0] and "'tpe'" in lines[0]


def test_multi_objective_sweep_saves_the_pareto_front(tmp_path: Path) -> None:
    run_sweep(tmp_path, "hydra/sweeper/sampler=nsga2", "hydra.sweeper.direction=[minimize,minimize]",
              "objective=[loss,time]", "hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=2",
              "hydra.sweeper.seed=0", "x=interval(0,1)", "sleep_s=interval(0,0.3)")
    result = json.loads((tmp_path / "sweep_summary.json").read_text())
    assert result["directions"] == ["minimize", "minimize"]
    front = result["pareto_front"]
    assert front and all(len(t["values"]) == 2 for t in front)



def test_the_best_trial_alone_is_scored_on_its_test_split_and_the_study_keeps_it(tmp_path: Path) -> None:
    """The app's mode=eval runs once, in the best trial's run dir; its eval.json becomes the study's
    `best_trial_test` attr, the summary's and the closing line's test scores."""
    proc = run_sweep(tmp_path, "hydra/sweeper/sampler=grid", "x=choice(0.9,0.3)", "test_samples=7")
    study = load_study(tmp_path)
    best = study.best_trial
    assert best.params["x"] == 0.3
    scores = study.user_attrs["best_trial_test"]
    assert scores["trial"] == best.number and scores["test_samples"] == 7
    assert scores["test_loss"] == best.value + 1.0  # the fake eval's score of that trial
    assert [p.parent.name for p in tmp_path.glob("*/eval.json")] == [str(best.number)]
    summary = json.loads((tmp_path / "sweep_summary.json").read_text())
    assert summary["best_trial"]["test"] == scores
    assert f"on its 7 test samples: test_loss {scores['test_loss']:.6g}" in proc.stdout + proc.stderr
    # a rerun of the sweep keeps the scores of an unchanged best trial: nothing is started
    assert score_best_trial(study, NO_APP, tmp_path) == scores


def test_a_best_trial_without_a_test_split_is_not_evaluated(tmp_path: Path) -> None:
    study = optuna.create_study()
    study.add_trial(optuna.trial.create_trial(value=1.0, user_attrs={"summary": {"test_samples": None}}))
    assert score_best_trial(study, NO_APP, tmp_path) is None and "best_trial_test" not in study.user_attrs


def test_test_best_false_turns_the_test_eval_off(tmp_path: Path) -> None:
    run_sweep(tmp_path, "hydra/sweeper/sampler=grid", "x=choice(0.3)", "test_samples=7",
              "hydra.sweeper.test_best=false")
    assert "best_trial_test" not in load_study(tmp_path).user_attrs and not list(tmp_path.glob("*/eval.json"))
