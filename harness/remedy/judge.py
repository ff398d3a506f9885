"""Keep or reject an attempt by its outcome, pick the run's result, and give the verdict.

An attempt is kept when its best val loss, up to the last step both it and the attempt it builds
on reached, beats that attempt's by more than 1% and twice the eval-to-eval noise, or by 1% while
its val loss was lower at every one of at least five evals both had (a noisy base: evals at the
same steps on the same batches are paired, and a remedy that is lower at each of five is not
luck, 1 in 32). The result is
the attempt with the lowest best val loss among those that may be it (the run as given, the kept
remedies, the continuations that finish a stopped base): a rejected remedy never is, so remedies
never leave a run worse than it was given.
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from harness.core.metric_names import VAL_LOSS
from harness.diagnosis.outcome import BETTER_BY, LEARNED, NOISE_SIGMAS, guessing_accuracy_bound, outcome
from harness.diagnosis.load import RunData, Series
from harness.diagnosis.signals import noise_level
from harness.remedy.story import CODE_CHANGE, KEPT_AT_THE_END, REJECTED, Attempt, Story

log = logging.getLogger("harness")

# An attempt beats the one it builds on when its best val loss up to the last step both reached is
# lower by more than 1% and more than twice the eval-to-eval noise of the attempt it replaces: an
# eval of fixed batches wobbles by the model's own noise, and a remedy that only matches the
# attempt before it changed nothing worth keeping, unless it cleared the critical findings the
# attempt before it had. The noise is measured on the log of the loss:
# a loss wobbles in proportion to its size, so a base that oscillated between 0.2 and 50 is beaten
# by a remedy that ends at 0.001, and the same ratio counts at any scale. A base whose loss wobbles
# (or climbs as it overfits) has a wide noise band; a remedy lower at every eval both had is better
# by that pairing, whatever the band.
PAIRED_EVALS = 5  # lower at each of this many shared evals: 1 in 2**5 by chance


def better(new: RunData, old: RunData, cleared: bool = False) -> bool:
    """Whether `new` beats `old` (see above); one that `cleared` every critical finding of `old` only
    has to be at least as low: a run as good and no longer sick is better."""
    new_val, old_val = (r.series(VAL_LOSS, kind="eval") for r in (new, old))
    if not len(new_val.steps):
        return False
    if not len(old_val.steps):
        return True
    # where both have evals; a continuation whose first eval falls after the run it continues stopped
    # is compared at that first eval
    common = max(min(int(new_val.steps[-1]), int(old_val.steps[-1])), int(new_val.steps[0]))
    new_best, old_best = _best_until(new_val, common), _best_until(old_val, common)
    if not math.isfinite(new_best) or not math.isfinite(old_best):
        return math.isfinite(new_best)
    return ((cleared and new_best <= old_best) or _beats(new_best, old_best, log_noise(old_val))
            or (_beats(new_best, old_best, 0.0) and _lower_at_every_eval(new_val, old_val, common)))


def _lower_at_every_eval(new: Series, old: Series, until: int) -> bool:
    """`new` below `old` at each of at least PAIRED_EVALS eval steps both have, up to `until` (a
    non-finite loss is never below; any loss is below a non-finite one)."""
    shared, new_at, old_at = np.intersect1d(new.steps[new.steps <= until], old.steps, return_indices=True)
    if len(shared) < PAIRED_EVALS:
        return False
    ours = new.values[new_at]
    theirs = np.where(np.isfinite(old.values[old_at]), old.values[old_at], np.inf)
    return bool(np.all(np.isfinite(ours) & (ours < theirs)))


def log_noise(val: Series) -> float:
    """The eval-to-eval noise of a val loss curve, as a log ratio (positive losses only)."""
    finite = val.finite()
    positive = finite.values > 0
    return noise_level(Series(finite.steps[positive], np.log(finite.values[positive])))


def _beats(new_best: float, old_best: float, noise: float) -> bool:
    """Lower than `old_best` by more than BETTER_BY of it and NOISE_SIGMAS times its eval noise
    (`noise` a log ratio); a loss at or below 0 by BETTER_BY of its size alone."""
    if old_best <= 0 or new_best <= 0:
        return new_best < old_best - BETTER_BY * abs(old_best)
    return math.log(new_best) < math.log(old_best) + min(math.log1p(-BETTER_BY), -NOISE_SIGMAS * noise)


def _best_until(val: Series, step: int) -> float:
    values = val.values[val.steps <= step]
    finite = values[np.isfinite(values)]
    return float(finite.min()) if len(finite) else math.inf


def ranked_loss(value: Any) -> float:
    """A best val loss for ranking attempts: a missing or non-finite one ranks below every finite one."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.inf


def learned(run: RunData) -> bool:
    """The run's own outcome says it learned (its monitor clearly beat the untrained model and, for
    the val loss, the prior, and a classifier's best val accuracy clearly beat guessing the largest
    class): a result at the prior or at chance heals nothing. A run from before the baseline eval
    has no outcome: its accuracy alone is read."""
    ended = outcome(run)
    if ended is not None:
        return ended.state == LEARNED
    accuracy = run.summary.get("best_val_accuracy")
    chance = run.summary.get("chance_loss")
    if accuracy is None or not chance:
        return True
    return accuracy > guessing_accuracy_bound(run, round(math.exp(chance)))


def rejudge_at_the_end(story: Story, finished: Attempt, noise: float) -> None:
    """A remedy was judged against its base where the base stopped, early, for the remedy; one that
    starts over may trail there and still end far better. Once the base is finished (`finished`
    continues it to its end), a rejected remedy on it that also ran to the end is compared where
    both ended, by the same margin: better than the whole run as given, it is kept after all."""
    base = story.attempt(finished.finishes)
    given = min(ranked_loss(base.best_val_loss), ranked_loss(finished.best_val_loss))
    if not math.isfinite(given):
        return
    for attempt in story.attempts:
        if (attempt.base == base.number and attempt.outcome == REJECTED and attempt.finishes is None
                and attempt.steps == finished.steps and _beats(ranked_loss(attempt.best_val_loss), given, noise)):
            attempt.outcome = KEPT_AT_THE_END


def best(story: Story) -> Attempt:
    """The attempt with the lowest best val loss (no val loss ranks last; the earlier one on a tie),
    or the best monitored value where the user named a monitor (`trainer.monitor=val/f1`: the run
    is measured by it), among those that may be the result: the run as given, remedies kept for
    doing measurably better (also at the end, once a base stopped early was finished), and the
    continuations that finish them. A rejected remedy is not, however low it ended: it did not beat
    its base where both had trained, and a base the live diagnosis stopped early is finished
    instead, so that remedy=auto never ends below the run as given."""
    eligible = [a for a in story.attempts if a.outcome != REJECTED or a.finishes is not None]
    return min(eligible, key=lambda a: (_ranked(a), a.number))


def _ranked(attempt: Attempt) -> float:
    """Lower is better: the best val loss, or the named monitor's best (negated where higher is better)."""
    if attempt.monitor is None:
        return ranked_loss(attempt.best_val_loss)
    value = ranked_loss(attempt.monitor.get("best"))
    return value if attempt.monitor.get("mode") == "min" or not math.isfinite(value) else -value


def conclude(story: Story) -> None:
    """The best attempt (lowest best val loss; no val loss ranks last) and the verdict."""
    first, result = story.attempts[0], best(story)
    story.best_attempt = result.number
    if first.code and all(a.applied is None for a in story.attempts):  # at most the run as given, finished
        story.verdict = CODE_CHANGE
        log.warning("remedy: %s at %s; no override reaches it, so nothing was tried", CODE_CHANGE,
                    ", ".join(first.code))
    elif len(story.attempts) == 1:
        story.verdict = "sick" if first.critical else "healthy"
    elif result is first or result.finishes == first.number:
        story.verdict = "unchanged"
    else:
        healed = not result.critical and result.learned is not False
        story.verdict = "healed" if healed else "sick"
    log.warning("remedy: %s; the run's result is attempt %d's (best val loss %s)", story.verdict, result.number,
                result.best_val_loss)
