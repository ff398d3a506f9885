"""Rules read off the loss curves: diverging, plateau at chance, oscillating, overfitting, underfitting."""
from __future__ import annotations

import math

import numpy as np

from harness.diagnosis.advice import instability_fixes
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.signals import (EDGE_POINTS, end_level, excursions, fmt, noise_level, recent_improvement,
                                       rolling_median, start_level, value_at)

# A loss that ends 1.5x above where it started went backwards: noise on a learning run never
# does that (its end is below its start), a diverging one does long before it reaches NaN.
DIVERGE_RISE = 1.5
# "At chance": within 5% of ln(K). A model that learned even the label frequencies of an
# unbalanced task, or anything about the inputs, leaves this band within a few hundred updates.
CHANCE_BAND = 0.05
# Oscillating: the train loss, smoothed over 3 log points, climbs above its best so far by >25%,
# by >0.05 nats and by >6x its own point-to-point noise, then comes back, at least 3 times: the
# field's "loss goes up and down wildly -> LR too high". Smoothing and the noise floor keep batch
# noise out (small batches logged every step wobble 25% and more around a falling trend); an
# unstable run's climbs last several log points and are many noise widths tall.
OSC_REL_RISE = 0.25
OSC_ABS_RISE = 0.05
OSC_NOISE_SIGMAS = 6.0
OSC_MIN_EXCURSIONS = 3
# Overfitting: the val loss ends >10% above its best while the train loss kept falling.
OVERFIT_VAL_RISE = 0.10
MIN_EVALS = 3
# Underfitting: the val loss (fixed samples, so free of batch noise) improved by <2% over the last
# 30% of the run (converged), yet the train loss covered less than half of the way from its start
# to the known optimum, and val ~ train (no overfit).
PLATEAU_TAIL = 0.3
PLATEAU_IMPROVEMENT = 0.02
UNDERFIT_REMAINING = 0.5
UNDERFIT_GAP = 0.10


def diverging(run: RunData) -> Finding | None:
    loss = run.series("train/loss")
    val = run.series("val/loss", kind="eval")
    if not len(loss):
        return None
    bad = [(int(s), v) for s, v in zip(loss.steps, loss.values) if not math.isfinite(v)]
    bad += [(int(s), v) for s, v in zip(val.steps, val.values) if not math.isfinite(v)]
    start, end = start_level(loss), end_level(loss)
    finite = loss.finite()
    if bad:
        step, value = min(bad)
        before = finite.values[finite.steps < step]
        detail = (f"loss {fmt(start)} at the start, {fmt(float(before.max()))} at its largest before "
                  f"going {value} at step {step}" if len(before) else f"loss {value} from step {step} on")
    elif run.summary.get("status") == "diverged" or (math.isfinite(start) and end > DIVERGE_RISE * start):
        peak = int(np.argmax(finite.values))
        detail = (f"train loss {fmt(start)} at the start, {fmt(end)} at the end (step {int(finite.steps[-1])}), "
                  f"peak {fmt(float(finite.values[peak]))} at step {int(finite.steps[peak])}")
    else:
        return None
    reason = run.summary.get("reason")
    status = f"; the run stopped: {reason}" if run.summary.get("status") == "diverged" and reason else ""
    return Finding("diverging", Severity.CRITICAL, "the loss diverged", f"{detail}{status}.", instability_fixes(run))


def plateau_at_chance(run: RunData) -> Finding | None:
    chance = run.summary.get("chance_loss")
    loss = run.series("train/loss").finite()
    if not chance or len(loss) < 2:
        return None
    late = loss.after_fraction(0.5)
    level = float(np.median(late.values))
    if abs(level - chance) > CHANCE_BAND * chance:
        return None
    best_val = run.summary.get("best_val_loss")
    if best_val is not None and best_val < (1 - CHANCE_BAND) * chance:
        return None
    k = round(math.exp(chance))
    parts = [f"median train loss {fmt(level)} over steps {int(late.steps[0])}-{int(late.steps[-1])} vs "
             f"chance ln({k}) = {fmt(chance)}"]
    if best_val is not None:
        parts.append(f"best val loss {fmt(best_val)}")
    accuracy = run.summary.get("best_val_accuracy")
    if accuracy is not None:
        parts.append(f"best val accuracy {fmt(accuracy)} (chance {fmt(1 / k)})")
    return Finding("plateau_at_chance", Severity.CRITICAL, "the model predicts no better than uniform guessing",
                   "; ".join(parts) + ".",
                   "check that labels belong to their inputs (data.shuffle_labels, a misaligned join or "
                   "augmentation); check that gradients reach the layers (see vanishing_gradients / dead_relu "
                   "if reported); run `mode=doctor`: it overfits one small batch, which must work; "
                   "then try optim.lr 3-10x either way.")


def oscillating(run: RunData) -> Finding | None:
    loss = run.series("train/loss")
    found = excursions(rolling_median(loss), OSC_REL_RISE, max(OSC_ABS_RISE, OSC_NOISE_SIGMAS * noise_level(loss)))
    if len(found) < OSC_MIN_EXCURSIONS:
        return None
    shown = ", ".join(f"{fmt(peak)} at step {step} (best so far {fmt(low)})" for step, peak, low in found[:4])
    more = f" and {len(found) - 4} more" if len(found) > 4 else ""
    return Finding("oscillating", Severity.WARNING, "the training loss keeps jumping back up",
                   f"{len(found)} climbs of >{OSC_REL_RISE:.0%} above the best loss so far: {shown}{more}.",
                   instability_fixes(run))


def overfitting(run: RunData) -> Finding | None:
    val = run.series("val/loss", kind="eval").finite()
    train = run.series("train/loss").finite()
    if len(val) < MIN_EVALS or not len(train):
        return None
    best = int(np.argmin(val.values))
    best_step, best_val, last_val = int(val.steps[best]), float(val.values[best]), float(val.values[-1])
    train_then, train_now = value_at(train, best_step), end_level(train)
    if last_val <= (1 + OVERFIT_VAL_RISE) * best_val or train_now >= train_then:
        return None
    return Finding("overfitting", Severity.WARNING, "the model memorises the training set",
                   f"val loss best {fmt(best_val)} at step {best_step}, {fmt(last_val)} at step "
                   f"{int(val.steps[-1])} (+{last_val / best_val - 1:.0%}) while the train loss fell "
                   f"{fmt(train_then)} -> {fmt(train_now)}.",
                   f"use the best checkpoint (checkpoints/best.pt, step {best_step}) or early_stop=default; "
                   "more data (data.n_train) or a smaller model; regularise: optim.weight_decay, "
                   "model.dropout, loss.label_smoothing.")


def underfitting(run: RunData) -> Finding | None:
    optimum, chance = run.summary.get("optimum_loss"), run.summary.get("chance_loss")
    train = run.series("train/loss").finite()
    val = run.series("val/loss", kind="eval").finite()
    if optimum is None or len(train) < 2 * EDGE_POINTS or len(val) < MIN_EVALS:
        return None
    start, end, last_val = start_level(train), end_level(train), float(val.values[-1])
    still_learning = not recent_improvement(val, PLATEAU_TAIL) < PLATEAU_IMPROVEMENT  # NaN: too few evals
    at_chance = chance is not None and abs(end - chance) <= CHANCE_BAND * chance
    far = end - optimum > UNDERFIT_REMAINING * (start - optimum)
    generalises = last_val <= (1 + UNDERFIT_GAP) * end
    if still_learning or at_chance or not far or not generalises:
        return None
    return Finding("underfitting", Severity.WARNING, "the loss settled far above what this task allows",
                   f"train loss {fmt(start)} -> {fmt(end)} and flat over the last {PLATEAU_TAIL:.0%} of the run, "
                   f"val {fmt(last_val)}; the known optimum is {fmt(optimum)}.",
                   "a bigger model (model.width, model.depth / n_layer, n_embd); a higher optim.lr or a longer "
                   "run; less regularisation (optim.weight_decay, model.dropout).")

