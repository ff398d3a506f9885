"""harness.loop.callbacks.sweep_trial.TrialReporter: the trial-process side of pruning. The reporter is built from
environment variables exactly as a trial process builds it, against a study that another
Study object (standing for the sweeper) writes to the same sqlite file."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest

from apps.sweep_helpers import run_sweep, start_sweep
from conftest import wait_until
from harness.loop.callbacks import sweep_trial as trial_env
from harness.loop.callbacks.sweep_trial import TrialReporter, build_pruner, open_storage

optuna.logging.set_verbosity(optuna.logging.WARNING)
STEPS = (10, 20, 30)


def sweeper_study(tmp_path: Path, pruner: dict, directions: tuple[str, ...] = ("minimize",)
                  ) -> tuple[optuna.Study, str]:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(storage=open_storage(url), study_name="s",
                                directions=list(directions), pruner=build_pruner(pruner))
    return study, url


def finished_trials(study: optuna.Study, values: list[float]) -> None:
    """Earlier trials whose eval curves the pruner compares against (asking the pruner too:
    successive halving records its rungs then)."""
    for value in values:
        trial = study.ask()
        for step in STEPS:
            trial.report(value, step)
            trial.should_prune()
        study.tell(trial, value)


def reporter_env(study: optuna.Study, url: str, trial: optuna.Trial, pruner: dict,
                 **extra: str) -> dict[str, str]:
    return {
        trial_env.ENV_STORAGE: url,
        trial_env.ENV_STUDY: study.study_name,
        trial_env.ENV_TRIAL_ID: str(trial._trial_id),
        trial_env.ENV_PRUNER: json.dumps(pruner),
        **extra,
    }


def test_no_reporter_outside_a_sweep() -> None:
    assert TrialReporter.from_env({}) is None


@pytest.mark.parametrize("pruner", [
    {"class": "MedianPruner", "kwargs": {"n_startup_trials": 2}},
    {"class": "PercentilePruner", "kwargs": {"percentile": 50.0, "n_startup_trials": 2}},
    {"class": "SuccessiveHalvingPruner", "kwargs": {"min_resource": 10, "reduction_factor": 2}},
    {"class": "HyperbandPruner", "kwargs": {"min_resource": 10, "max_resource": 30,
                                            "reduction_factor": 2}},
])
def test_bad_trial_is_pruned_good_one_is_not(tmp_path: Path, pruner: dict) -> None:
    study, url = sweeper_study(tmp_path, pruner)
    finished_trials(study, [1.0, 1.1, 1.2, 1.3])
    verdicts = {}
    for label, value in [("bad", 50.0), ("good", 0.1)]:
        trial = study.ask()
        reporter = TrialReporter.from_env(reporter_env(study, url, trial, pruner))
        assert reporter is not None and reporter.number == trial.number
        pruned_at = None
        for step in STEPS:
            reporter.report(value, step)
            if reporter.should_prune():
                pruned_at = step
                break
        verdicts[label] = pruned_at
        study.tell(trial, state=optuna.trial.TrialState.PRUNED if pruned_at else None,
                   values=None if pruned_at else value)
    assert verdicts["bad"] is not None and verdicts["good"] is None
    stored = study.trials[-2]
    assert stored.state == optuna.trial.TrialState.PRUNED
    assert max(stored.intermediate_values) == verdicts["bad"]  # reported from the "trial"


def test_trial_stops_when_its_sweeper_is_gone(tmp_path: Path) -> None:
    pruner = {"class": "NopPruner"}
    study, url = sweeper_study(tmp_path, pruner)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    trial = study.ask()
    env = reporter_env(study, url, trial, pruner, **{trial_env.ENV_SWEEPER_PID: str(gone.pid)})
    reporter = TrialReporter.from_env(env)
    assert reporter is not None and reporter.should_prune()


def test_trial_closed_by_the_sweeper_stops_without_error(tmp_path: Path) -> None:
    pruner = {"class": "NopPruner"}
    study, url = sweeper_study(tmp_path, pruner)
    trial = study.ask()
    reporter = TrialReporter.from_env(reporter_env(study, url, trial, pruner))
    assert reporter is not None and not reporter.should_prune()
    study.tell(trial, state=optuna.trial.TrialState.FAIL)  # e.g. declared interrupted
    reporter.report(1.0, 10)
    assert reporter.should_prune()


def test_only_rank_zero_writes_and_multi_objective_never_prunes(tmp_path: Path) -> None:
    pruner = {"class": "NopPruner"}
    study, url = sweeper_study(tmp_path, pruner)
    trial = study.ask()
    rank1 = TrialReporter.from_env(reporter_env(study, url, trial, pruner, RANK="1"))
    assert rank1 is not None
    rank1.report(1.0, 10)
    assert study.trials[0].intermediate_values == {}

    (tmp_path / "mo").mkdir()
    mo_study, mo_url = sweeper_study(tmp_path / "mo", pruner, ("minimize", "minimize"))
    mo_trial = mo_study.ask()
    reporter = TrialReporter.from_env(reporter_env(mo_study, mo_url, mo_trial, pruner))
    assert reporter is not None
    reporter.report(1.0, 10)  # Optuna would raise for a multi-objective study
    assert not reporter.should_prune()


def _processes_with(text: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if text in cmdline:
                found.append(int(proc.name))
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_trials_die_with_a_sweeper_killed_by_sigkill(tmp_path):
    sweeper = start_sweep(tmp_path / "sweep", "x=interval(0,1)", "mode=hang", "hydra.sweeper.n_trials=1")
    trials: list[int] = []

    def started() -> bool:
        trials[:] = [pid for pid in _processes_with(str(tmp_path / "sweep")) if pid != sweeper.pid]
        return bool(trials)

    try:
        wait_until(started, "the trial process")
    finally:
        sweeper.kill()
        sweeper.wait()
    deadline = time.time() + 10
    while any(Path(f"/proc/{pid}").exists() and not _zombie(pid) for pid in trials) and time.time() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in trials if Path(f"/proc/{pid}").exists() and not _zombie(pid)]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except (OSError, IndexError):
        return True


def test_refused_sweep_leaves_the_sweep_dir_as_it_was(tmp_path):
    sweep_dir = tmp_path / "sweep"
    run_sweep(sweep_dir, "x=interval(0,1)", "hydra.sweeper.n_trials=1", "hydra.sweeper.study_name=s")
    before = {p: p.read_bytes() for p in sweep_dir.rglob("*") if p.is_file()}
    run_sweep(sweep_dir, "x=interval(0,1)", "hydra.sweeper.direction=maximize", "hydra.sweeper.n_trials=1",
              "hydra.sweeper.study_name=s", expect_rc=2)
    assert {p: p.read_bytes() for p in sweep_dir.rglob("*") if p.is_file()} == before
