"""What the study's trials mean for the sweep: which are done, which were lost with a killed
sweeper, which grid combinations are still owed. Kept in user attrs (their names are defined
here), so the same facts show in optuna-dashboard and survive any restart.
"""
from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

import optuna
from optuna.trial import FrozenTrial, TrialState

from harness.loop.callbacks.sweep_trial import pid_alive
from hydra_plugins.harness_optuna_sweeper._space import SearchSpace

ATTR_REASON = "reason"  # why a trial failed (or was pruned)
ATTR_OWNER = "sweeper"  # {"host", "pid"} of the sweeper running the trial
ATTR_HEARTBEAT = "heartbeat"  # unix time, refreshed while the trial runs
ATTR_GRID = "grid_key"  # the grid combination an enqueued trial stands for
ATTR_PROCESS = "process"  # {"exit_code", "started_at", "ended_at", "slot"} of the trial process
ATTR_OVERRIDES = "overrides"  # the trial's sampled overrides: paste them to rerun it
ATTR_RUN_DIR = "run_dir"
ATTR_SUMMARY = "summary"  # the run's summary.json
ATTR_REMEDIES = "remedies"  # diagnose.remedy=auto: the overrides each attempt applied, kept or not ([] when none)
ATTR_REMEDY_VERDICT = "remedy_verdict"  # healthy | healed | unchanged | sick
STUDY_SEARCH_SPACE = "search_space"  # study user attrs: {name: sweep text}
STUDY_N_TRIALS = "n_trials"  # the target of the latest run
# {"trial", "checkpoint", "step", "test_samples", "test_loss", ...}: the best trial's test scores (mode=eval's
# eval.json). A study attr: Optuna refuses user attrs on a trial once it has finished.
STUDY_BEST_TEST = "best_trial_test"
INTERRUPTED = "interrupted"
SURPLUS = "surplus: another sweeper sharing the study took the last trial"
HEARTBEAT_S = 30.0
# A sweeper on another host that has not refreshed its trials for this long is gone.
STALE_S = 180.0
HOST = socket.gethostname()


def is_done(trial: FrozenTrial) -> bool:
    """Counts towards n_trials. An interrupted trial does not (it is run again instead), nor does
    a surplus one (closed unrun)."""
    if trial.state in (TrialState.COMPLETE, TrialState.PRUNED):
        return True
    return trial.state == TrialState.FAIL and trial.user_attrs.get(ATTR_REASON) not in (INTERRUPTED, SURPLUS)


def is_surplus(study: optuna.Study, trial: optuna.Trial, target: int) -> bool:
    """Whether the trials numbered before this one already fill n_trials. Sweepers sharing a study
    check the count and then ask, so two of them can ask for the last trial at once; the trial
    numbers the storage hands out decide which one runs it."""
    earlier = [t for t in study.get_trials(deepcopy=False) if t.number < trial.number]
    return sum(is_done(t) or t.state == TrialState.RUNNING for t in earlier) >= target


@dataclass(frozen=True)
class Progress:
    done: int
    running: int  # by any sweeper sharing the study
    waiting: int  # enqueued, not started


def progress(study: optuna.Study) -> Progress:
    trials = study.get_trials(deepcopy=False)
    return Progress(
        done=sum(map(is_done, trials)),
        running=sum(t.state == TrialState.RUNNING for t in trials),
        waiting=sum(t.state == TrialState.WAITING for t in trials),
    )


def claim(trial: optuna.Trial) -> None:
    """Record who runs the trial (its start time serves as the first heartbeat)."""
    trial.set_user_attr(ATTR_OWNER, {"host": HOST, "pid": os.getpid()})


def beat(trials: Iterable[optuna.Trial]) -> None:
    now = time.time()
    for trial in trials:
        trial.set_user_attr(ATTR_HEARTBEAT, now)


def take_over_orphans(study: optuna.Study, still_running: Callable[[FrozenTrial], bool]
                      ) -> tuple[list[FrozenTrial], list[int]]:
    """The RUNNING trials of a sweeper that was killed: those `still_running` says live on (a
    cluster job) are claimed, to be waited for; the others are closed as interrupted, so they
    are run again. Returns (kept trials, numbers of the closed ones)."""
    now = time.time()
    kept, lost = [], []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if not _is_orphan(t, now):
            continue
        trial = optuna.Trial(study, t._trial_id)
        if still_running(t):
            claim(trial)
            kept.append(t)
        else:
            close(study, trial, TrialState.FAIL, None, {ATTR_REASON: INTERRUPTED})
            lost.append(t.number)
    return kept, lost


def _is_orphan(trial: FrozenTrial, now: float) -> bool:
    owner = trial.user_attrs.get(ATTR_OWNER)
    if isinstance(owner, dict) and owner.get("host") == HOST:
        pid = owner.get("pid")
        return not isinstance(pid, int) or pid == os.getpid() or not pid_alive(pid)
    # Another host's sweeper, or a sweeper killed in the instant between creating the trial
    # and claiming it: lost once nothing has refreshed the trial for STALE_S.
    started = trial.datetime_start.timestamp() if trial.datetime_start else 0.0
    return now - float(trial.user_attrs.get(ATTR_HEARTBEAT, started)) > STALE_S


def remedy_attrs(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What a trial run with diagnose.remedy=auto did to itself, for optuna-dashboard's columns."""
    if "remedy_verdict" not in summary:
        return {}
    applied = [" ".join(a["applied"]["overrides"]) for a in summary.get("attempts", []) if a.get("applied")]
    return {ATTR_REMEDIES: applied, ATTR_REMEDY_VERDICT: summary["remedy_verdict"]}


def grid_key(space: SearchSpace, row: Mapping[str, Any]) -> str:
    return json.dumps(space.sampled_overrides(row))


def enqueue_missing_grid(study: optuna.Study, space: SearchSpace) -> int:
    """Queue every grid combination that is neither done, running nor queued: each exactly once,
    including those whose trial was interrupted."""
    owed = {
        t.user_attrs.get(ATTR_GRID) for t in study.get_trials(deepcopy=False)
        if is_done(t) or t.state in (TrialState.RUNNING, TrialState.WAITING)
    }
    missing = [row for row in space.grid() if grid_key(space, row) not in owed]
    for row in missing:
        study.enqueue_trial(row, user_attrs={ATTR_GRID: grid_key(space, row)})
    return len(missing)


def close(study: optuna.Study, trial: optuna.Trial, state: TrialState,
          values: Optional[Sequence[float]], attrs: Mapping[str, Any]) -> bool:
    """Record attrs and the final state; False if someone else already closed the trial."""
    try:
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
    except optuna.exceptions.UpdateFinishedTrialError:
        return False
    study.tell(trial, values=values, state=state, skip_if_finished=True)
    return True
