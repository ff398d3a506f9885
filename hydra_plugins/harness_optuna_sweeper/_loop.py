"""Keep n_jobs trials running until the study holds its n_trials: ask -> run -> tell, per slot.

All study calls (ask, tell, attrs) happen on this thread; worker threads only wait for their
trial process. A freed slot starts its next trial at once (from a proposal prepared while the
others ran), so no slot waits for the slowest trial of a batch, nor for the sampler.

Ctrl-C/SIGTERM only set a flag, so they never land between creating a trial and recording who
runs it: the runners stop their processes, those trials are marked FAIL "interrupted" (not
counted, so a rerun runs them again), and run() returns False. A second Ctrl-C aborts at once;
a rerun then cleans up after the killed sweeper: it waits for the trials whose runner can
rejoin them (a cluster job outlives its sweeper) and runs the others again.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from threading import Event
from typing import Any, Callable, Iterator, Sequence

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import FrozenTrial, TrialState

from harness.loop.callbacks import sweep_trial as trial_env
from hydra_plugins.harness_optuna_sweeper import _ledger
from hydra_plugins.harness_optuna_sweeper._outcome import Outcome, judge
from hydra_plugins.harness_optuna_sweeper._space import SearchSpace
from harness.launch.runner import (
    LOG_NAME,
    AppCommand,
    ProcessResult,
    TrialRunner,
    TrialSpec,
)

log = logging.getLogger(__name__)


@dataclass
class _Active:
    trial: optuna.Trial
    spec: TrialSpec


class TrialLoop:
    def __init__(
        self,
        study: optuna.Study,
        space: SearchSpace,
        runner: TrialRunner,
        app: AppCommand,
        sweep_dir: Path,
        n_jobs: int,
        target: int,
        grid: bool,
        storage_url: str,
        pruner_spec: dict[str, Any],
        rejoin: Sequence[FrozenTrial] = (),
    ) -> None:
        self.study, self.space, self.runner, self.app = study, space, runner, app
        self.sweep_dir, self.n_jobs, self.target, self.grid = sweep_dir, n_jobs, target, grid
        self.storage_url, self.pruner_spec = storage_url, pruner_spec
        self.rejoin = list(rejoin)  # trials a killed sweeper left running, whose jobs still run
        self.n_objectives = len(study.directions)

    def run(self) -> bool:
        """Run trials until the target is reached; False if stopped by a signal."""
        self._stop = Event()
        self._free = list(range(self.n_jobs))
        self._active: dict[Future[ProcessResult], _Active] = {}
        self._ready: list[optuna.Trial] = []
        self._rejoining = [optuna.Trial(self.study, t._trial_id) for t in self.rejoin]
        last_beat = time.monotonic()
        with _stop_on_signals(self._stop), ThreadPoolExecutor(self.n_jobs, "trial") as self._pool:
            while True:
                self._launch(propose=True)
                self._prepare()
                if not self._active:
                    break
                done, _ = wait(self._active, timeout=1.0, return_when=FIRST_COMPLETED)
                finished = [(self._active.pop(future), future.result()) for future in done]
                self._free.extend(item.spec.slot for item, _ in finished)
                self._launch(propose=False)  # a prepared proposal takes a freed slot at once
                for item, result in finished:
                    self._finish(item, result)
                if time.monotonic() - last_beat > _ledger.HEARTBEAT_S:
                    _ledger.beat([*(item.trial for item in self._active.values()), *self._ready,
                                  *self._rejoining])
                    last_beat = time.monotonic()
        for trial in self._ready:  # prepared but stopped before its turn
            _ledger.close(self.study, trial, TrialState.FAIL, None,
                          {_ledger.ATTR_REASON: _ledger.INTERRUPTED})
        return not self._stop.is_set()

    def _launch(self, propose: bool) -> None:
        """Start trials in the free slots: those to rejoin first, then prepared proposals, then
        new ones if `propose`."""
        while self._free and not self._stop.is_set():
            if self._rejoining:
                trial = self._rejoining.pop(0)
                item = _Active(trial, self._spec(trial, self._free.pop(0)))
                self._active[self._pool.submit(self._run, self.runner.rejoin, item.spec, self._stop)] = item
                continue
            if not self._ready:
                trial = self._propose() if propose and self._may_start() else None
                if trial is None:
                    return
                self._ready.append(trial)
            trial = self._ready.pop()
            item = _Active(trial, self._spec(trial, self._free.pop(0)))
            self._active[self._pool.submit(self._run, self.runner.run, item.spec, self._stop)] = item
            self._annotate(item)  # while the process starts, not before

    def _prepare(self) -> None:
        """With several slots, keep one proposal ready, so that a freed slot starts its next
        trial without waiting for the sampler and the storage. It is made after every result
        told so far, while the same trials run as when the slot frees: the sampler knows no
        less than if it were asked then. With one slot nothing overlaps, and the next proposal
        waits for the last result as sequential search needs."""
        if self.n_jobs > 1 and not self._ready and not self._stop.is_set() and self._may_start():
            trial = self._propose()
            if trial is not None:
                self._ready.append(trial)

    def _may_start(self) -> bool:
        p = _ledger.progress(self.study)
        if self.grid:
            return p.waiting > 0  # only queued combinations; never let the sampler improvise
        return p.done + p.running < self.target

    def _propose(self) -> optuna.Trial | None:
        """A new trial with its parameters, or None when another sweeper took the last one."""
        trial = self.study.ask()
        _ledger.claim(trial)  # first, so a killed sweep leaves no trial without an owner
        if not self.grid and _ledger.is_surplus(self.study, trial, self.target):
            _ledger.close(self.study, trial, TrialState.FAIL, None, {_ledger.ATTR_REASON: _ledger.SURPLUS})
            return None
        for name, distribution in self.space.distributions().items():
            _suggest(trial, name, distribution)
        return trial

    def _spec(self, trial: optuna.Trial, slot: int) -> TrialSpec:
        return TrialSpec(
            number=trial.number,
            run_dir=trial_dir(self.sweep_dir, trial),
            overrides=(*self.space.fixed, *self.space.sampled_overrides(trial.params)),
            env=self._trial_env(trial),
            slot=slot,
            n_slots=self.n_jobs,
        )

    def _annotate(self, item: _Active) -> None:
        """What a user looking at a running trial wants: how to rerun it, and where it runs."""
        sampled = self.space.sampled_overrides(item.trial.params)
        item.trial.set_user_attr(_ledger.ATTR_OVERRIDES, sampled)
        item.trial.set_user_attr(_ledger.ATTR_RUN_DIR, str(item.spec.run_dir))
        log.info("[trial %d] start (slot %d): %s", item.trial.number, item.spec.slot,
                 " ".join(sampled))

    def _trial_env(self, trial: optuna.Trial) -> dict[str, str]:
        return {
            trial_env.ENV_STORAGE: self.storage_url,
            trial_env.ENV_STUDY: self.study.study_name,
            # The storage id (not the number) is what optuna.trial.Trial(study, id) needs.
            trial_env.ENV_TRIAL_ID: str(trial._trial_id),
            trial_env.ENV_TRIAL_NUMBER: str(trial.number),
            trial_env.ENV_PRUNER: json.dumps(self.pruner_spec),
            trial_env.ENV_SWEEPER_PID: str(os.getpid()),
        }

    def _run(self, run: Callable[[AppCommand, TrialSpec, Event], ProcessResult], spec: TrialSpec,
             stop: Event) -> ProcessResult:
        try:
            return run(self.app, spec, stop)
        except OSError as err:  # the command could not even start (missing python, bad cwd)
            now = time.time()
            return ProcessResult(exit_code=-1, killed=None, started_at=now, ended_at=now,
                                 log_path=_write_log(spec.run_dir, f"could not start: {err}"))

    def _finish(self, item: _Active, result: ProcessResult) -> None:
        outcome = judge(result, item.spec.run_dir, self.n_objectives)
        attrs = {
            _ledger.ATTR_REASON: outcome.reason,
            _ledger.ATTR_PROCESS: {
                "exit_code": result.exit_code,
                "started_at": result.started_at,
                "ended_at": result.ended_at,
                "slot": item.spec.slot,
            },
            _ledger.ATTR_SUMMARY: outcome.summary,
            **_ledger.remedy_attrs(outcome.summary),
        }
        if not _ledger.close(self.study, item.trial, outcome.state, outcome.values, attrs):
            log.warning("[trial %d] was already closed elsewhere", item.trial.number)
            return
        took = result.ended_at - result.started_at
        log.info("[trial %d] %s in %.1f s%s", item.trial.number, outcome.state.name, took,
                 _describe(outcome))


def trial_dir(sweep_dir: Path, trial: optuna.Trial | FrozenTrial) -> Path:
    """A trial's run dir: <hydra.sweep.dir>/<number>."""
    return sweep_dir / str(trial.number)


def _suggest(trial: optuna.Trial, name: str, dist: BaseDistribution) -> Any:
    """Sample (or take the enqueued value of) one parameter through the public suggest API."""
    if isinstance(dist, CategoricalDistribution):
        return trial.suggest_categorical(name, dist.choices)
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, step=dist.step, log=dist.log)
    assert isinstance(dist, FloatDistribution)
    return trial.suggest_float(name, dist.low, dist.high, step=dist.step, log=dist.log)


def _describe(outcome: Outcome) -> str:
    if outcome.state == TrialState.COMPLETE and outcome.values is not None:
        return ": " + ", ".join(f"{v:.6g}" for v in outcome.values)
    return f": {outcome.reason}" if outcome.reason else ""


def _write_log(run_dir: Path, line: str) -> Path:
    path = run_dir / LOG_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        f.write(line + "\n")
    return path


@contextmanager
def _stop_on_signals(stop: Event) -> Iterator[None]:
    """SIGINT/SIGTERM set `stop`; a second one raises KeyboardInterrupt. Signals the user's
    shell ignores (nohup, background jobs) stay ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        log.warning("%s: stopping the running trials (send it again to abort)",
                    signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig, old in previous.items():
        if old is not signal.SIG_IGN:
            signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
