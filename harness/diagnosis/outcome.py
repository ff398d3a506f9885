"""What the run's own evals say happened, measured against where it started: the one outcome a
run has, read the same way for every objective and monitor.

The start is the untrained model's eval (summary.json's `initial_*`, the baseline row). A value
*clearly* beats another when it is better by more than 1% of it and more than twice the curve's
noise (as a log ratio for a positive loss, in its own units otherwise), the margin the remedy judge
uses. The outcome is one of:
- `non-finite`: the loss went Inf/NaN, or the run diverged;
- `learned`: the best eval clearly beat the start (and, for the val loss, the prior where known: the
  built-in loss's, or your objective's `prior` part);
- `beat its start, not its prior`: clearly below the untrained model, not below predicting the prior;
- `beat its start, not guessing`: a classifier whose best val accuracy is not clearly above always
  naming the largest class;
- `never left its start`: no eval clearly beat the untrained model.
and it ended `near its best`, or `worse than its best` when each of its last evals (a quarter of
them, at least two) is clearly worse than the best: a sustained stretch, not one bad eval.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from harness.core.metric_names import TRAIN_LOSS, VAL_LOSS, flat
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.signals import MIN_EVALS, Series, fmt, noise_level

BETTER_BY = 0.01  # better by more than 1% of the value ... (the remedy judge's margin too)
NOISE_SIGMAS = 2.0  # ... and more than twice the eval-to-eval noise
LATE_SHARE = 0.25  # the share of the last evals that must all be worse for the run to have ended worse
LATE_MIN = 2

# Guessing: always naming the largest class of the eval samples (`val_majority_share`, at least
# 1/K); "clearly better": by more than 4 binomial standard deviations of an accuracy measured on
# `eval_samples` samples (50 classes, 256 samples, 4% in the largest class: above 8.9%). Without
# those numbers: twice chance, or chance + 0.1 for two classes (where twice chance is perfect).
ABOVE_CHANCE_ACCURACY = 0.1
ABOVE_CHANCE_SIGMAS = 4.0

LEARNED, PRIOR_ONLY, NEVER, NONFINITE = "learned", "beat its start, not its prior", "never left its start", "non-finite"
GUESSING_ONLY = "beat its start, not guessing"
NEAR, WORSE = "near its best", "worse than its best"


@dataclass(frozen=True)
class Outcome:
    monitor: str
    higher_is_better: bool
    state: str
    ending: str | None  # None for a run without a finite eval
    start: float | None
    best: float | None
    best_step: int | None
    final: float | None
    noise: float

    @property
    def bad(self) -> bool:
        """The run did not work: non-finite, never clearly learned, or ended clearly worse than its best."""
        return self.state != LEARNED or self.ending == WORSE

    def line(self) -> str:
        values = (f"{self.monitor} {fmt(self.start) if self.start is not None else '?'} untrained, best "
                  f"{fmt(self.best) if self.best is not None else '?'}"
                  + (f" at step {self.best_step}" if self.best_step is not None else "")
                  + (f", final {fmt(self.final)}" if self.final is not None else ""))
        ending = f", ended {self.ending}" if self.ending else ""
        return f"{self.state}{ending} ({values})"

    def to_json(self) -> dict[str, Any]:
        return {"monitor": self.monitor, "state": self.state, "ending": self.ending, "start": self.start,
                "best": self.best, "best_step": self.best_step, "final": self.final, "noise": self.noise}


def outcome(run: RunData) -> Outcome | None:
    """The run's outcome on its monitor (val/loss unless trainer.monitor named another); None
    without a baseline eval (a run from before it was measured)."""
    named = run.summary.get("monitor") or {}
    monitor, higher = named.get("name") or VAL_LOSS, named.get("mode") == "max"
    start = run.summary.get("initial_" + flat(monitor))
    if start is None:
        return None
    evals = run.series(monitor, kind="eval")
    finite = evals.finite()
    diverged = run.summary.get("status") == "diverged" or not np.isfinite(run.series(TRAIN_LOSS).values).all()
    if not len(finite):
        return Outcome(monitor, higher, NONFINITE, None, start, None, None, None, 0.0)
    noise = _noise(run, finite, higher)
    pick = np.argmax if higher else np.argmin
    at = int(pick(finite.values))
    best, final = float(finite.values[at]), float(finite.values[-1])
    state = NONFINITE if diverged or len(finite) < len(evals) else _state(run, monitor, higher, start, best, noise)
    late = max(LATE_MIN, math.ceil(LATE_SHARE * len(finite)))
    after_best = finite.values[at + 1:]
    worse = len(after_best) >= late and all(_clearly(best, float(v), higher, noise) for v in after_best[-late:])
    return Outcome(monitor, higher, state, WORSE if worse else NEAR, float(start), best, int(finite.steps[at]), final,
                   noise)


def _state(run: RunData, monitor: str, higher: bool, start: float, best: float, noise: float) -> str:
    if not _clearly(best, start, higher, noise):
        return NEVER
    prior = run.summary.get("val_prior_loss") if monitor == VAL_LOSS and prior_applies(run) else None
    if prior is not None and not _clearly(best, prior, higher, noise):
        return PRIOR_ONLY
    accuracy, chance = run.summary.get("best_val_accuracy"), run.summary.get("chance_loss")
    if accuracy is not None and chance and accuracy <= guessing_accuracy_bound(run, round(math.exp(chance))):
        return GUESSING_ONLY  # a loss a little below the prior, every prediction still the largest class
    return LEARNED


def prior_applies(run: RunData) -> bool:
    """The built-in loss's prior is in its units; the user's objective has one only where it reports
    its `prior` part (the loss of its best constant prediction, summary.json's `prior_loss`)."""
    return not run.summary.get("user_loss") or run.summary.get("prior_loss") is not None


def guessing_accuracy_bound(run: RunData, k: int) -> float:
    """The best val accuracy that guessing (always the largest class) could reach on this eval sample."""
    share, samples = run.summary.get("val_majority_share"), run.summary.get("eval_samples")
    if not share or not samples:
        return min(2 / k, 1 / k + ABOVE_CHANCE_ACCURACY)
    p = max(share, 1 / k)
    return p + ABOVE_CHANCE_SIGMAS * math.sqrt(p * (1 - p) / samples)


def _noise(run: RunData, values: Series, higher: bool) -> float:
    """The curve's noise: of the log for a positive loss, of the values otherwise. A few evals'
    differences are mostly the trend (the model changing), so a loss takes the smaller of its evals'
    and its logged train loss's, whose many points show the jitter of the same trajectory."""
    if higher or not (values.values > 0).all():
        return noise_level(values)
    noise = noise_level(Series(values.steps, np.log(values.values)))
    train = run.series(TRAIN_LOSS).finite()
    if len(train) > len(values) and (train.values > 0).all():
        noise = min(noise, noise_level(Series(train.steps, np.log(train.values))))
    return noise


def _clearly(new: float, old: float, higher: bool, noise: float) -> bool:
    """`new` better than `old` by more than BETTER_BY of it and NOISE_SIGMAS noises."""
    if higher:
        return new > old + max(BETTER_BY * abs(old), NOISE_SIGMAS * noise)
    if new > 0 and old > 0:
        return math.log(new) < math.log(old) + min(math.log1p(-BETTER_BY), -NOISE_SIGMAS * noise)
    return new < old - max(BETTER_BY * abs(old), NOISE_SIGMAS * noise)


def untold(run: RunData, ended: Outcome | None) -> Finding | None:
    """A bad outcome no other warning tells: the run never clearly beat its untrained model or its
    prior, or it ended clearly worse than its best over a sustained stretch. `diagnose` adds it only where no
    warning or critical finding was raised, so that a run that did not work is never "No pathology
    found", on any objective. `ended` is the run's outcome."""
    if ended is None or ended.state == NONFINITE or len(run.series(ended.monitor, kind="eval").finite()) < MIN_EVALS:
        return None
    where = (f"`{ended.monitor}` was {fmt(ended.start)} untrained and best at step {ended.best_step} "
             f"({fmt(ended.best)}), eval-to-eval noise {fmt(ended.noise)}")
    if ended.ending == WORSE:
        return Finding("ended_worse", Severity.WARNING, "the run ended clearly worse than its best eval",
                       f"{where}; each of its last evals was clearly worse (more than 1% and twice the noise), "
                       f"ending at {fmt(ended.final)}. `best.pt` holds step {ended.best_step}'s model.",
                       "use best.pt (mode=eval scores it); find what changed after that step: a term of your "
                       "objective that pulls against the rest, an LR too high for the later steps, memorising the "
                       "training set; early_stop.patience ends such a run at its best.")
    if ended.state == NEVER:
        return Finding("never_learned", Severity.WARNING, "no eval clearly beat the untrained model",
                       f"{where}: never better by more than 1% and twice the noise.",
                       "check that the loss reads what the model outputs (mode=doctor overfits a few samples and "
                       "checks the code at its line), then the LR (mode=lr_find) and the steps.")
    if ended.state == PRIOR_ONLY:  # (not guessing: an accuracy on a few eval samples cannot show it clearly)
        return Finding("never_learned", Severity.WARNING, "no eval clearly beat predicting the prior",
                       f"{where}: below the untrained model, but never clearly below predicting the targets' "
                       f"frequencies or mean, which a model blind to its inputs does.",
                       "the model has not used its inputs yet: check that they reach it (mode=doctor overfits a few "
                       "samples), then the LR (mode=lr_find) and the steps.")
    return None


def held_to_outcome(ended: Outcome | None, findings: list[Finding], shapes: frozenset[str]) -> list[Finding]:
    """The invariant, in one place: a critical finding means the run did not work. On a run that
    learned and ended near its best, whatever a window of its curves showed (one early excursion,
    a stretch of noise) is at most a warning, and a finding about the curves' shape alone
    (`shapes`: slow, oscillating, short of the optimum) is an info: the outcome wins. Each says why."""
    if ended is None or ended.bad:
        return findings
    why = f": by its own evals the run {ended.line()}."
    held = []
    for f in findings:
        was = "critical" if f.severity is Severity.CRITICAL else "a warning"
        if f.name in shapes and f.severity.rank < Severity.INFO.rank:
            f = replace(f, severity=Severity.INFO, evidence=f"{f.evidence} Not {was}{why}")
        elif f.severity is Severity.CRITICAL:
            f = replace(f, severity=Severity.WARNING, evidence=f"{f.evidence} Not {was}{why}")
        held.append(f)
    return held
