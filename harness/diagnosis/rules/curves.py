"""Rules read off the loss curves: diverging, plateau at chance or at the prior, oscillating,
overfitting, underfitting."""
from __future__ import annotations

import math

import numpy as np

from harness.diagnosis.advice import instability_fixes
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData, Series
from harness.diagnosis.remedies import calmer_updates, faster_updates
from harness.diagnosis.rules.common import blind_loss, peak_lr_update_ratio
from harness.diagnosis.rules.data_order import boundary_steps
from harness.diagnosis.outcome import guessing_accuracy_bound
from harness.diagnosis.signals import (EDGE_POINTS, MIN_EVALS, end_level, excursions, fmt, level_at, noise_level,
                                       rolling_median, start_level, still_falling)
from harness.core.metric_names import (TRAIN_LOSS, TRAIN_LOSS_FIRST, TRAIN_LOSS_MAX, TRAIN_LR, VAL_LOSS,
                                       VAL_LOSS_ON_TRAIN)

# A loss that ends 1.5x above its first logged value went backwards: noise on a learning run
# never does that (its end is below its start), a diverging one does long before it reaches NaN.
# The first value, not a median of several: a blow-up can take only one or two log windows.
DIVERGE_RISE = 1.5
# ... or any single update's loss (`train/loss_max`, the largest of each log window) went past
# 1.15x where the untrained model started: ln K, or the run's first update's loss
# (`train/loss_first`) when that is higher (a small model's init can start above ln K). A loss
# only goes down from there, so a loss well above it is a blow-up even when it happened inside
# the first window and the curve settled afterwards (its first logged mean is already the
# explosion, so the rise test above cannot see it). Healthy runs of every family in the
# pathology suite peak at <= 1.05x ln K; an MLP under SGD at 40x its working LR peaks at 1.3x,
# then its units die; a 2-layer GPT under AdamW at 0.1 (100x) at 1.17x, then trains on to a
# worse loss; a 2-unit MLP starts at up to 1.2x ln K.
BLOWUP_OVER_CHANCE = 1.15
# The update must also stand out from its own window's mean by that factor (or come in a window whose
# mean passed the bar too): an LR 1000x too low left its loss near where it started, and one batch at
# 1.16x chance there was noise around that level. The bar is raised by the run's own single-update
# noise beyond a steady batch's: the median over
# log windows of the window's largest update over its mean, over 1.2. Batches of 32 and more
# measure 1.0-1.2 on healthy runs (the default GPT 1.10, the char-RNN preset 1.08, an MLP at a tiny
# LR 1.006), and the bar stays; at batch 1 each update is one sample, and a healthy window's worst
# one sits 1.5x and more above its mean (an SGD MLP: 1.48), so one update far above the first one
# (itself a single sample) is noise, not a blow-up.
STEADY_SPREAD = 1.2
# "Where the untrained model started" includes its own batch-to-batch spread: its largest loss over
# a few batches scored when the run is built (`initial_losses`). On raw inputs that spread is wide
# (one batch 2x, another 9x the first), and a first-window peak inside it is no blow-up; an LR 100x
# too high drives a model whose batches all start near chance far past it.
# ... unless the run came back from it: the train loss ended within 10% of its best before the
# blow-up and clearly (10%) below where the untrained model started, and the val loss within 5% of
# its best. A healthy AdamW run without clip or guard had one window at 1.76x its first loss and
# still ended at its best; a blow-up that cost the run leaves it above where it was, or where it
# started (an SGD run whose units died in its first 20 updates sat at chance before and after its
# blow-up). A blow-up past the untrained model's spread in the first window has no "before" and
# stays a divergence: LR-too-high runs that then settle on a mediocre plateau look recovered by any
# test that has only the run itself to go by. One the run came back from is `loss_spikes` (info).
RECOVERED_TRAIN = 1.10
RECOVERED_PROGRESS = 0.9
RECOVERED_VAL = 1.05
# ... or, judged on the model as a whole, it kept learning through it: its val loss (fixed samples,
# free of batch noise, though not of the wobble of the weights) ended near its best, within 5% or
# 4 robust standard deviations of its eval-to-eval noise, and that best lies clearly below where
# the untrained model started (10%, and those 4 standard deviations). A noisy run (batch 1) whose
# single updates swing far is still learning, not diverging; a run whose blow-up left it at
# chance has a val loss that fell only from the blow-up's height, to where it started.
KEPT_LEARNING_SIGMAS = 4.0
# A rise to DIVERGE_RISE x the start must also stand above the train loss's own log-to-log noise
# by this many robust standard deviations: at batch 1 on raw inputs one window's mean can sit 2x
# another's by chance.
DIVERGE_NOISE_SIGMAS = 4.0
# A run whose val loss (fixed samples) fell at every one of at least MIN_EVALS evals, to below where
# the untrained model started, is learning, whatever one batch did: never `diverging` unless its loss
# went non-finite or a guard stopped it.
# "At chance": within 5% of ln(K). A model that learned even the label frequencies of an
# unbalanced task, or anything about the inputs, leaves this band within a few hundred updates.
CHANCE_BAND = 0.05
# ... given time at its full LR: judged only after 50 updates past warmup (the healthy preset
# leaves the band within ~50); shorter runs (debug=smoke, a run cut off in warmup) are not judged.
CHANCE_MIN_UPDATES = 50
# ... unless the model classifies clearly better than guessing (outcome.guessing_accuracy_bound):
# with many classes a loss inside the band can come with accuracy well above 1/K.
# "At the prior": the loss sits within 5% of the prior loss (the entropy of the targets'
# frequencies; for regression the MSE of predicting their mean) and stopped moving: the model
# learned what it can without looking at its inputs. Judged when the prior is clearly below
# chance (else plateau_at_chance names it), after the same updates past warmup, and only when
# the val loss improved by <5% over the last 30% of the run: a healthy run passes through the
# prior on its way down, falling fast.
PRIOR_BAND = 0.05
# The best val loss is judged against the validation split's own prior (`val_prior_loss`), which
# a model blind to its inputs cannot beat: its val loss is that entropy plus the mismatch between
# the splits' frequencies (position-only language models in the pathology suite end 0.1% above
# it). More than 2% below it, the model learned something from its inputs. Without a val prior
# the training split's stands in, with the prior's own 5% band (the stdlib corpus' val split has
# a 3% lower entropy than its training split).
PRIOR_VAL_BAND = 0.02
# Oscillating: the train loss, smoothed over 3 log points, climbs above its best so far by >25%,
# by >0.05 nats and by >6x its own point-to-point noise, then comes back, at least 3 times: the
# field's "loss goes up and down wildly -> LR too high". Smoothing and the noise floor keep batch
# noise out (small batches logged every step wobble 25% and more around a falling trend); an
# unstable run's climbs last several log points and are many noise widths tall.
OSC_REL_RISE = 0.25
OSC_ABS_RISE = 0.05
OSC_NOISE_SIGMAS = 6.0
OSC_MIN_EXCURSIONS = 3
# Climbs within 2 log windows after a guard event are the guard's (a rollback restarts from an
# older, worse state) or the bad batch's, not the optimiser's: a run whose problem was NaNs from
# its data ranked oscillating first.
GUARD_EVENTS = frozenset({"rollback", "skip_nonfinite", "skip_spike"})
OSC_GUARD_REACH = 2
# Overfitting: the val loss ends (median of its last 3 evals) above its best by more than the
# eval noise could explain, while the train loss fell by another >20% since then: the gap widens
# because the model fits the training set. "More than noise": 4 robust standard deviations of the
# val loss's eval-to-eval change, and at least 5% (the val batches are fixed, so their noise is
# the model's own wobble; a healthy run's val loss stays within 1-3% of its best as its LR
# decays). An unstable run's val loss jumps too, but then the train loss does not keep falling.
OVERFIT_MIN_RISE = 0.05
OVERFIT_NOISE_SIGMAS = 4.0
OVERFIT_TRAIN_DROP = 0.20
# ... or, with a smaller train drop (>= 5%), the gap itself says it: over the last 4 evals the
# val loss rose at every eval and so did val minus train (a run whose val rose 13% over five
# evals while its train loss fell 18% overfits as surely). Noise does not rise four times in a row.
# ... an info when what it gave back is under a tenth of what the run learned (its prior, or ln K,
# down to its best val loss): checkpoints/best.pt holds the best, and the rest is noise-sized.
OVERFIT_GAVE_BACK = 0.10
OVERFIT_TREND_EVALS = 4
OVERFIT_TREND_TRAIN_DROP = 0.05
# Underfitting: the val loss (fixed samples, so free of batch noise) improved by <5% over the last
# 30% of the run (converged), yet the train loss covered less than half of the way from its start
# to the known optimum, and val ~ train (no overfit).
PLATEAU_TAIL = 0.3
PLATEAU_IMPROVEMENT = 0.05
UNDERFIT_REMAINING = 0.5
UNDERFIT_GAP = 0.10
# ... "converged" for underfitting is stricter than for the plateaus: < 2.5% over the tail. Short
# healthy runs whose LR decays measure 2.8-5.1% there in the pathology suite; too-small models 0.5-1.8%.
UNDERFIT_TAIL_IMPROVEMENT = 0.025
# Slow progress (an LR too low, or too few updates), for data with or without a known optimum:
# the run ended while its val loss was still falling (lower at each of the last 3 evals: the val
# batches are fixed, so that is a trend, not noise) with the train loss still >5% above the
# prior: it has not learned even the targets' frequencies, which a model at a working LR passes
# within a few hundred updates (the tiny GPT: ~50). Or it never got below the prior and its
# updates at the peak LR are small: median update/weight ratio <= 3e-4. In the pathology suite,
# runs at LRs 10-1000x too low measure 1e-5 to 1.5e-4 there, runs with nothing to learn
# (shuffled labels) 2e-3 to 4.5e-3, healthy runs 7e-4 to 2e-2.
SLOW_FALLING_EVALS = 3
SLOW_ABOVE_PRIOR = PRIOR_BAND
SLOW_UPDATE_RATIO = 3e-4
# ... or the loss keeps moving but slowly: normalisation layers (batch norm) make a network's
# loss fall at any LR, so a model 10x below its working LR passes the prior and learns, far too
# slowly. Judged when the median update/weight ratio at the peak LR is <= 5e-4 (half of the
# smallest healthy run's in the pathology suite, 1.1e-3), the val loss fell at each of the last 3
# evals, and the run's last quarter still held >= 10% of its val loss's whole fall: a loss
# approaching its floor like exp(-t / tau) puts that share there only while the run is shorter
# than ~2 tau, i.e. it stopped far from where its LR would take it. A run that converged (its last
# quarter barely moves its loss) is not slow, however small its updates.
SLOW_MOVING_RATIO = 5e-4
SLOW_TAIL = 0.25
SLOW_TAIL_SHARE = 0.10
# ... or, whatever the size of its updates, the loss fell no slower over the run's last quarter than
# over the quarter before, at an LR held at its peak since mid-run: a loss approaching its floor
# like exp(-t / tau) keeps a quarter-to-quarter rate ratio of exp(-T / (4 tau)), which stays above
# exp(-1/4) only while tau exceeds the whole run T: the run ended before its first time constant,
# with no sign yet of where it levels out (a decaying LR can speed up the end of a healthy run, so
# such runs are not judged by this). The fall must be one underfitting counts as still learning.
# Healthy runs at a constant LR measure 0.07-0.71 (the pathology suite's draw and the remedy benchmark's),
# the suite's slow_progress runs at a constant LR 0.66-1.45 (6 of 8 above exp(-1/4)).
SLOW_UNDIMINISHED_RATE = math.exp(-0.25)
# Those last two say a run stopped early in a descent; one whose val loss already ended below half
# of what a model blind to its inputs gets (the val prior, or ln K) learned most of its task: an info.
SLOW_LEARNED_SHARE = 0.5
SLOW_HELD_LR = 0.9


def diverging(run: RunData) -> Finding | None:
    loss = run.series(TRAIN_LOSS)
    val = run.series(VAL_LOSS, kind="eval")
    stopped = run.summary.get("status") == "diverged"
    if not len(loss) and not stopped:
        return None
    bad = [(int(s), v) for s, v in zip(loss.steps, loss.values) if not math.isfinite(v)]
    bad += [(int(s), v) for s, v in zip(val.steps, val.values) if not math.isfinite(v)]
    finite = loss.finite()
    start, end = (float(finite.values[0]), end_level(loss)) if len(finite) else (math.nan, math.nan)
    if bad:
        step, value = min(bad)
        symptom, exploded = step, True
        before = finite.values[finite.steps < step]
        detail = (f"loss {fmt(start)} at the start, {fmt(float(before.max()))} at its largest before "
                  f"going {value} at step {step}" if len(before) else f"loss {value} from step {step} on")
    elif stopped and not len(finite):  # every update before the stop was skipped: none was logged
        symptom, exploded = 0, True
        detail = "no update's loss was logged before the run stopped"
    elif not stopped and fell_at_every_eval(val.finite()) and float(val.finite().values[-1]) < untrained_start(run):
        return None
    elif stopped or (math.isfinite(start) and end > DIVERGE_RISE * start
                     and end - start > DIVERGE_NOISE_SIGMAS * noise_level(finite) and not _val_fine(run, start)):
        peak = int(np.argmax(finite.values))
        symptom, exploded = int(finite.steps[peak]), stopped
        detail = (f"train loss {fmt(start)} at the start, {fmt(end)} at the end (step {int(finite.steps[-1])}), "
                  f"peak {fmt(float(finite.values[peak]))} at step {int(finite.steps[peak])}")
    elif (blowup := unrecovered_blowup(run)) is not None:
        step, value, start_loss, what = blowup
        symptom, exploded = step, True
        detail = (f"one update's loss reached {fmt(value)} in the window ending at step {step}, "
                  f"{fmt(value / start_loss)}x {what} = {fmt(start_loss)} (where the untrained model started); "
                  f"the train loss ended at {fmt(end)}")
    else:
        return None
    reason = run.summary.get("reason")
    status = f"; the run stopped: {reason}" if stopped and reason else ""
    return Finding("diverging", Severity.CRITICAL, "the loss diverged", f"{detail}{status}.", instability_fixes(run),
                   calmer_updates(run, _last_good_step(finite, symptom) + 1, exploded))


def untrained_start(run: RunData) -> float:
    """Where the untrained model started: the first update's loss, or chance ln K when higher;
    the first logged train loss without either."""
    first, loss = run.series(TRAIN_LOSS_FIRST).finite(), run.series(TRAIN_LOSS).finite()
    found = [float(first.values[0])] if len(first) else []
    found += [float(run.summary["chance_loss"])] if run.summary.get("chance_loss") else []
    return max(found) if found else float(loss.values[0]) if len(loss) else math.inf


def fell_at_every_eval(val: Series) -> bool:
    """The val loss fell from each eval to the next, over at least MIN_EVALS evals."""
    return len(val) >= MIN_EVALS and bool(np.all(np.diff(val.values) < 0))


def unrecovered_blowup(run: RunData) -> tuple[int, float, float, str] | None:
    """`_blowup`'s single update the run did not come back from; None when there was none."""
    blowup = _blowup(run)
    return blowup if blowup is not None and not _came_back(run, blowup) else None


def recovered_blowup(run: RunData) -> tuple[int, float, float, str] | None:
    """`_blowup`'s single update when the run learned through it (`loss_spikes` says so)."""
    blowup = _blowup(run)
    return blowup if blowup is not None and _came_back(run, blowup) else None


def _came_back(run: RunData, blowup: tuple[int, float, float, str]) -> bool:
    return _recovered(run, blowup, end_level(run.series(TRAIN_LOSS))) or _val_fine(run, blowup[2])


def _tail_share(val: Series) -> float:
    """The share of the val loss's whole fall (first eval to its best) made over the run's last
    SLOW_TAIL; 0 when it did not fall."""
    fall = float(val.values[0] - val.values.min())
    cut = val.steps[0] + (1 - SLOW_TAIL) * (val.steps[-1] - val.steps[0])
    before = val.values[val.steps <= cut]
    return float(before[-1] - val.values[-1]) / fall if fall > 0 and len(before) else 0.0


def _late_rate_ratio(val: Series) -> float | None:
    """The val loss's rate of fall over the run's last quarter over its rate over the quarter
    before (per step, between the evals at or before each cut); None without an eval in each, or
    when the quarter before did not fall."""
    span = val.steps[-1] - val.steps[0]
    cuts = [val.steps[0] + share * span for share in (0.5, 1 - SLOW_TAIL)]
    ends = [int(np.nonzero(val.steps <= cut)[0][-1]) for cut in cuts] + [len(val) - 1]
    if len(set(ends)) < 3:
        return None
    (a, b, c), steps = (float(val.values[i]) for i in ends), [int(val.steps[i]) for i in ends]
    before = (a - b) / (steps[1] - steps[0])  # a quarter that did not fall is read as noise, not a late start
    return (b - c) / (steps[2] - steps[1]) / before if before > 0 else None


def _learned_most(run: RunData, val: Series) -> bool:
    prior = blind_loss(run)
    return bool(prior) and prior > 0 and float(val.values[-1]) <= SLOW_LEARNED_SHARE * prior


def _lr_held(run: RunData) -> bool:
    """The LR stayed within SLOW_HELD_LR of its peak over the second half of the run."""
    lr = run.series(TRAIN_LR).finite()
    if not len(lr):
        return False
    late = lr.after_fraction(0.5)
    return bool(len(late)) and float(late.values.min()) >= SLOW_HELD_LR * float(lr.values.max())


def _last_good_step(loss: Series, symptom: int) -> int:
    """Where the run was last well: its lowest logged train loss before the symptom (0 when it only
    rose). A checkpoint between there and the symptom already holds the damage."""
    before = loss.steps < symptom
    return int(loss.steps[before][np.argmin(loss.values[before])]) if before.any() else 0


def _blowup(run: RunData) -> tuple[int, float, float, str] | None:
    """(step, loss, start, what the start is) of the largest single-update loss that passed
    BLOWUP_OVER_CHANCE x where the untrained model started and stood out from the level of its own
    window by as much (or came in a window whose mean passed that bar too): one batch above a
    start the run never left is the batch noise around its level, not a blow-up."""
    chance = run.summary.get("chance_loss")
    peaks = run.series(TRAIN_LOSS_MAX).finite()
    if not chance or not len(peaks):
        return None
    first = run.series(TRAIN_LOSS_FIRST).finite()
    initial = [v for v in run.summary.get("initial_losses") or () if math.isfinite(v)]
    start, what = max([(float(chance), "chance ln K")]
                      + ([(float(first.values[0]), "the first update's loss")] if len(first) else [])
                      + ([(max(initial), f"the untrained model's largest loss over {len(initial)} batches")]
                         if initial else []))
    means = run.series(TRAIN_LOSS).finite()
    mean_at = dict(zip(means.steps.tolist(), means.values.tolist()))
    levels = np.array([mean_at.get(step, 0.0) for step in peaks.steps.tolist()])
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(levels > 0, peaks.values / levels, np.nan)  # each window's largest update over its mean
    for i in np.argsort(-peaks.values, kind="stable"):
        value, step, level = float(peaks.values[i]), int(peaks.steps[i]), float(levels[i])
        spread = _spread(np.delete(ratios, i))
        bar = BLOWUP_OVER_CHANCE * start * spread
        if value <= bar:
            return None
        if value > BLOWUP_OVER_CHANCE * spread * level or level > bar:
            return step, value, start, what
    return None


def _spread(ratios: np.ndarray) -> float:
    """How far the run's single-update noise exceeds a steady batch's: median over log windows of
    largest update / window mean (NaN where a window has no mean), over STEADY_SPREAD (at least 1).
    The candidate blow-up's own window is left out by the caller: it cannot vouch for itself."""
    ratios = ratios[~np.isnan(ratios)]
    return max(1.0, float(np.median(ratios)) / STEADY_SPREAD) if len(ratios) else 1.0


def _recovered(run: RunData, blowup: tuple[int, float, float, str], end: float) -> bool:
    """Whether the run ended as well off as before the blow-up, and better off than untrained."""
    step, _, start_loss, _ = blowup
    loss = run.series(TRAIN_LOSS).finite()
    before = loss.values[loss.steps < step]
    val = run.series(VAL_LOSS, kind="eval").finite()
    if not len(before):  # beyond the untrained model's own spread in the first updates: nothing to come back to
        return False
    # a run back at what a model blind to its inputs gets recovered nothing, however far below its
    # first loss that is (an untrained model on raw inputs starts far above chance)
    blind = blind_loss(run)
    if blind and len(val) and float(val.values.min()) >= blind:
        return False
    if _kept_learning(val, start_loss):
        return True
    if end > RECOVERED_TRAIN * float(before.min()) or end > RECOVERED_PROGRESS * start_loss:
        return False
    return not len(val) or float(val.values[-1]) <= RECOVERED_VAL * float(val.values.min())


def _kept_learning(val: Series, start_loss: float) -> bool:
    """The val loss ended near its best, clearly below where the untrained model started."""
    if len(val) < MIN_EVALS:
        return False
    best, last = float(val.values.min()), float(val.values[-1])
    noise = KEPT_LEARNING_SIGMAS * noise_level(val)
    return last <= max(RECOVERED_VAL * best, best + noise) and best <= min(RECOVERED_PROGRESS * start_loss,
                                                                            start_loss - noise)


def _val_fine(run: RunData, start: float) -> bool:
    """Whether a few huge training samples (`input_outliers`, `target_outliers`: outlier_samples'
    evidence) explain the train loss while the model itself is fine: the val loss ended within 5%
    of its best, clearly (10%) below where training started. Without such samples a val loss that recovered says
    nothing: a run that blew up in its first updates trains on to a worse loss than it could."""
    val = run.series(VAL_LOSS, kind="eval").finite()
    if len(val) < 2 or not any((run.summary.get(k) or {}).get("count") for k in ("input_outliers", "target_outliers")):
        return False
    best = float(val.values.min())
    return float(val.values[-1]) <= RECOVERED_VAL * best and best <= RECOVERED_PROGRESS * start


def _settled_level(run: RunData) -> tuple[float, Series] | None:
    """(median, points) of the train loss over the second half of the run after warmup, once the
    run had CHANCE_MIN_UPDATES updates at its full LR; None for shorter runs."""
    warmup = run.warmup or 0
    loss = run.series(TRAIN_LOSS).finite()
    loss = Series(loss.steps[loss.steps > warmup], loss.values[loss.steps > warmup])
    if not len(loss) or loss.steps[-1] - warmup < CHANCE_MIN_UPDATES:
        return None
    late = loss.after_fraction(0.5)
    return (float(np.median(late.values)), late) if len(late) >= EDGE_POINTS else None


def plateau_at_chance(run: RunData) -> Finding | None:
    chance = run.summary.get("chance_loss")
    settled = _settled_level(run) if chance else None
    if settled is None:
        return None
    level, late = settled
    if abs(level - chance) > CHANCE_BAND * chance:
        return None
    best_val = run.summary.get("best_val_loss")
    if best_val is not None and best_val < (1 - CHANCE_BAND) * chance:
        return None
    k = round(math.exp(chance))
    accuracy = run.summary.get("best_val_accuracy")
    if accuracy is not None and accuracy > guessing_accuracy_bound(run, k):
        return None
    parts = [f"median train loss {fmt(level)} over steps {int(late.steps[0])}-{int(late.steps[-1])} vs "
             f"chance ln({k}) = {fmt(chance)}"]
    if best_val is not None:
        parts.append(f"best val loss {fmt(best_val)}")
    if accuracy is not None:
        parts.append(f"best val accuracy {fmt(accuracy)} (chance {fmt(1 / k)})")
    return Finding("plateau_at_chance", Severity.CRITICAL, "the model predicts no better than uniform guessing",
                   "; ".join(parts) + ".",
                   "if another finding names a cause (vanishing_gradients, dead_relu, clip_pinned, "
                   "fp16_underflow, capacity_limit), fix that first; otherwise check that labels belong to "
                   "their inputs (data.shuffle_labels, a misaligned join or augmentation), run `mode=doctor` (it must "
                   "overfit one small batch), then try optim.lr 3-10x either way.")


# What a model that ignores its inputs predicts under each regression loss but mse (data/prior.py).
BEST_CONSTANT = {"l1": "median", "huber": "centre", "bce": "mean probability"}


def plateau_at_prior(run: RunData) -> Finding | None:
    prior, chance = run.summary.get("prior_loss"), run.summary.get("chance_loss")
    if not prior or (chance and prior > (1 - CHANCE_BAND) * chance):
        return None
    settled = _settled_level(run)
    val = run.series(VAL_LOSS, kind="eval").finite()
    if settled is None or len(val) < MIN_EVALS:
        return None
    level, late = settled
    best_val = run.summary.get("best_val_loss")
    val_prior, band = (run.summary["val_prior_loss"], PRIOR_VAL_BAND) if run.summary.get("val_prior_loss") else (
        prior, PRIOR_BAND)
    if abs(level - prior) > PRIOR_BAND * prior or (best_val is not None and best_val < (1 - band) * val_prior):
        return None
    last_val = float(val.values[-1])
    if still_falling(val, PLATEAU_TAIL, PLATEAU_IMPROVEMENT):
        return None  # on its way through the prior, not stuck at it
    what = "the targets' frequencies (their entropy)"
    if run.summary.get("task") == "regression":
        function = run.summary.get("loss_function") or "mse"
        what = "the targets' mean (MSE = their variance)" if function == "mse" else (
            f"the best constant under {function} (the targets' {BEST_CONSTANT[function]})")
    return Finding("plateau_at_prior", Severity.CRITICAL, "the model learned only the targets' statistics, "
                   "nothing from its inputs",
                   f"median train loss {fmt(level)} over steps {int(late.steps[0])}-{int(late.steps[-1])} and best val "
                   f"loss {fmt(best_val if best_val is not None else last_val)}, against {fmt(prior)} for predicting "
                   f"{what}" + (f" and chance {fmt(chance)}" if chance else "") + "; flat over the last "
                   f"{PLATEAU_TAIL:.0%} of the run.",
                   "check that the inputs reach the model and change its output (a forward that ignores or "
                   "detaches x, a wrong data.input_key, inputs zeroed by a transform) and that the labels belong to "
                   "their inputs (data.shuffle_labels, a misaligned join); if another finding names a "
                   "collapse (dead_relu, vanishing_gradients, diverging: a blow-up often leaves the model "
                   "predicting the frequencies), fix that first; run `mode=doctor` (it must overfit one small "
                   "batch); then try optim.lr 3-10x either way.")


def oscillating(run: RunData) -> Finding | None:
    loss = run.series(TRAIN_LOSS)
    found = excursions(rolling_median(loss), OSC_REL_RISE, max(OSC_ABS_RISE, OSC_NOISE_SIGMAS * noise_level(loss)))
    at_epoch_starts = boundary_steps(run)  # climbs there are epoch_boundary_jumps' to judge
    guarded = _guard_event_steps(run)  # a rollback restarts from a worse state; skips mark bad batches
    found = [climb for climb in found if climb[0] not in at_epoch_starts
             and not any(0 <= climb[0] - step <= OSC_GUARD_REACH * (run.cfg("trainer.log_every") or 1)
                         for step in guarded)]
    if len(found) < OSC_MIN_EXCURSIONS:
        return None
    shown = ", ".join(f"{fmt(peak)} at step {step} (best so far {fmt(low)})" for step, peak, low in found[:4])
    more = f" and {len(found) - 4} more" if len(found) > 4 else ""
    return Finding("oscillating", Severity.WARNING, "the training loss keeps jumping back up",
                   f"{len(found)} climbs of >{OSC_REL_RISE:.0%} above the best loss so far: {shown}{more}.",
                   instability_fixes(run), calmer_updates(run, found[0][0]))


def _guard_event_steps(run: RunData) -> list[int]:
    """Steps of the guard's rollbacks and skipped updates: the loss around them says what the
    guard did (or what a bad batch held), not how the optimiser moves."""
    return [int(e["step"]) for e in run.events if e.get("kind") in GUARD_EVENTS and "step" in e]


def overfitting(run: RunData) -> Finding | None:
    val = run.series(VAL_LOSS, kind="eval").finite()
    train = run.series(TRAIN_LOSS).finite()
    if len(val) < MIN_EVALS or not len(train):
        return None
    best = int(np.argmin(val.values))
    best_step, best_val, val_now = int(val.steps[best]), float(val.values[best]), end_level(val)
    train_then, train_now = level_at(train, best_step), end_level(train)
    allowed = max(OVERFIT_MIN_RISE * best_val, OVERFIT_NOISE_SIGMAS * noise_level(val))
    fitting = train_now < (1 - OVERFIT_TRAIN_DROP) * train_then or (
        train_now < (1 - OVERFIT_TREND_TRAIN_DROP) * train_then and _gap_widening(val, train))
    if val_now <= best_val + allowed or not fitting:
        return None
    on_train = run.series(VAL_LOSS_ON_TRAIN, kind="eval").finite()  # models with batch norm or dropout
    if len(on_train) >= MIN_EVALS and end_level(on_train) >= (1 - OVERFIT_TRAIN_DROP) * level_at(on_train, best_step):
        return None  # the training samples got worse in eval mode too: a train/eval-mode gap, not memorising
    prior = blind_loss(run)
    minor = bool(prior) and prior > best_val and val_now - best_val < OVERFIT_GAVE_BACK * (prior - best_val)
    return Finding("overfitting", Severity.INFO if minor else Severity.WARNING, "the model memorises the training set",
                   f"val loss best {fmt(best_val)} at step {best_step}, {fmt(val_now)} over the last evals "
                   f"(+{val_now / best_val - 1:.0%}, last {fmt(float(val.values[-1]))} at step {int(val.steps[-1])}) "
                   f"while the train loss fell {fmt(train_then)} -> {fmt(train_now)}.",
                   f"use the best checkpoint (checkpoints/best.pt, step {best_step}) or early_stop=default; "
                   "more data (data.n_train) or a smaller model; regularise: optim.weight_decay, "
                   "model.dropout, loss.label_smoothing.")


def _gap_widening(val: Series, train: Series) -> bool:
    """The val loss and its gap over the train loss both rose at each of the last evals."""
    if len(val) < OVERFIT_TREND_EVALS:
        return False
    steps, values = val.steps[-OVERFIT_TREND_EVALS:], val.values[-OVERFIT_TREND_EVALS:]
    gaps = [v - level_at(train, int(s)) for s, v in zip(steps, values)]
    return bool(np.all(np.diff(values) > 0) and np.all(np.diff(gaps) > 0))


def underfitting(run: RunData) -> Finding | None:
    optimum, chance = run.summary.get("optimum_loss"), run.summary.get("chance_loss")
    train = run.series(TRAIN_LOSS).finite()
    val = run.series(VAL_LOSS, kind="eval").finite()
    if optimum is None or len(train) < 2 * EDGE_POINTS or len(val) < MIN_EVALS:
        return None
    start, end, last_val = start_level(train), end_level(train), float(val.values[-1])
    still_learning = still_falling(val, PLATEAU_TAIL, UNDERFIT_TAIL_IMPROVEMENT)
    at_chance = chance is not None and abs(end - chance) <= CHANCE_BAND * chance
    prior = run.summary.get("prior_loss")
    at_prior = (bool(prior) and abs(end - prior) <= PRIOR_BAND * prior  # plateau_at_prior says more,
                and not (chance and prior > (1 - CHANCE_BAND) * chance))  # where it judges
    far = end - optimum > UNDERFIT_REMAINING * (start - optimum)
    generalises = last_val <= (1 + UNDERFIT_GAP) * end
    if still_learning or at_chance or at_prior or not far or not generalises:
        return None
    return Finding("underfitting", Severity.WARNING, "the loss settled far above what this task allows",
                   f"train loss {fmt(start)} -> {fmt(end)} and flat over the last {PLATEAU_TAIL:.0%} of the run, "
                   f"val {fmt(last_val)}; the known optimum is {fmt(optimum)}.",
                   "a bigger model (model.width, model.depth / n_layer, n_embd); a higher optim.lr or a longer "
                   "run; less regularisation (optim.weight_decay, model.dropout).")



def slow_progress(run: RunData) -> Finding | None:
    settled = _settled_level(run)
    val = run.series(VAL_LOSS, kind="eval").finite()
    train = run.series(TRAIN_LOSS).finite()
    if settled is None or len(val) < MIN_EVALS or (_blowup(run) is not None and not fell_at_every_eval(val)):
        return None
    start, end, prior = start_level(train), end_level(train), run.summary.get("prior_loss")
    ratio = peak_lr_update_ratio(run)
    floor = min(x for x in (prior, run.summary.get("chance_loss"), math.inf) if x)
    tiny_updates = ratio is not None and ratio <= SLOW_UPDATE_RATIO and end >= (1 - PRIOR_BAND) * floor
    falling = bool(np.all(np.diff(val.values[-SLOW_FALLING_EVALS:]) < 0))
    short_of_prior = bool(prior) and end > (1 + SLOW_ABOVE_PRIOR) * prior and end < start and falling
    tail_share = _tail_share(val)
    far_from_converged = falling and tail_share >= SLOW_TAIL_SHARE
    moving_slowly = ratio is not None and ratio <= SLOW_MOVING_RATIO and far_from_converged
    learning = far_from_converged and still_falling(val, PLATEAU_TAIL, UNDERFIT_TAIL_IMPROVEMENT)
    learned_most = _learned_most(run, val)
    rate_kept = _late_rate_ratio(val) if learning and _lr_held(run) else None
    undiminished = rate_kept is not None and rate_kept >= SLOW_UNDIMINISHED_RATE
    if not (tiny_updates or short_of_prior or moving_slowly or undiminished):
        return None
    parts = [f"train loss {fmt(start)} -> {fmt(end)}, val {fmt(float(val.values[0]))} -> {fmt(float(val.values[-1]))}"]
    if (moving_slowly or undiminished) and not (tiny_updates or short_of_prior):
        parts.append(f"the val loss fell at each of the last {SLOW_FALLING_EVALS} evals and its last "
                     f"{SLOW_TAIL:.0%} of the run still held {tail_share:.0%} of its whole fall: far from converged")
    if undiminished and not moving_slowly:
        parts.append(f"it fell {rate_kept:.2f}x as fast over the last quarter as over the one before, at its peak "
                     "LR: no sign yet of where it levels out, so its budget ended early in its descent")
    if short_of_prior:
        parts.append(f"still falling at the end and above {fmt(prior)}, the loss of predicting only the targets' "
                     "frequencies (which a model at a working LR passes early)")
    if ratio is not None:
        parts.append(f"median update/weight ratio at the peak LR {fmt(ratio)} (healthy runs: ~1e-3"
                     + (f"; at or below {SLOW_UPDATE_RATIO:g}, with the loss never below the prior, the "
                      "weights barely move)" if tiny_updates else ")"))
        if moving_slowly and run.summary.get("modules") and any("Norm" in m for m in run.summary["modules"]):
            parts.append("normalisation layers keep the loss moving at an LR far below the working one")
    lr = run.cfg("optim.lr")
    now = f" (now {lr:g})" if isinstance(lr, (int, float)) else ""
    if learned_most and not (tiny_updates or short_of_prior):
        parts.append(f"its val loss already ended below {SLOW_LEARNED_SHARE:.0%} of what a model blind to its inputs "
                     "gets: it learned most of its task, and more steps or a higher LR may still help")
    severity = Severity.INFO if learned_most and not (tiny_updates or short_of_prior) else Severity.WARNING
    return Finding("slow_progress", severity, "the run is learning, but far too slowly",
                   "; ".join(parts) + ".",
                   f"raise optim.lr{now} 3-10x (`mode=lr_find` suggests one)"
                   + ("; or switch SGD to AdamW (optim=adamw), whose steps do not shrink with a tiny gradient"
                      if str(run.cfg("optim._target_", "")).endswith("SGD") else "")
                   + "; check that clip and the schedule's floor are not holding the updates down; or train longer "
                   "(trainer.max_steps).", faster_updates(run, ratio))
