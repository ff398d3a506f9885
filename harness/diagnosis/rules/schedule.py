"""Rule about the LR schedule: did it finish decaying long before the run did?"""
from __future__ import annotations

import numpy as np

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.common import MIN_ROWS
from harness.diagnosis.signals import fmt, level_at
from harness.core.metric_names import TRAIN_LOSS, TRAIN_LR

# "At the floor": within 1% of the LR range above the smallest LR of the run. A cosine schedule
# spends its last ~6% there, linear its last ~1%, poly(power 2) its last 10%.
FLOOR_TOLERANCE = 0.01
# Flagged when the LR sat at its floor for the last quarter of the run or more: those updates
# barely move the weights, and the schedule was meant to span the whole run. The stretch counted
# is the one logged at the floor: while the run trains, the lowest LR so far is the one of the last
# step of a schedule still decaying, which says nothing about the steps it has yet to take.
FLAT_TAIL = 0.25


def schedule_ended_early(run: RunData) -> Finding | None:
    lr = run.series(TRAIN_LR).finite()
    if len(lr) < MIN_ROWS or run.events_of("rollback"):  # a rollback's LR cut is not the schedule's
        return None
    peak, floor = float(lr.values.max()), float(lr.values.min())
    if floor >= peak or lr.values[-1] > floor + FLOOR_TOLERANCE * (peak - floor):
        return None
    above = np.nonzero(lr.values > floor + FLOOR_TOLERANCE * (peak - floor))[0]
    reached = int(lr.steps[above[-1] + 1]) if len(above) else int(lr.steps[0])
    last, total = int(lr.steps[-1]), run.max_steps or int(lr.steps[-1])
    tail = (last - reached) / total
    if tail < FLAT_TAIL:
        return None
    return Finding("schedule_ended_early", Severity.WARNING, "the LR schedule ended long before the run",
                   f"the LR reached its floor {fmt(floor)} (peak {fmt(peak)}) at step {reached} and stayed there "
                   f"for the last {tail:.0%} of the {total} steps.",
                   "the decay should end at trainer.max_steps: a schedule length set on its own must match it; "
                   "with schedule=poly a lower schedule.power; or end the run where the LR bottoms out "
                   "(trainer.max_steps).")


# Warmup too long: it spans >= 25% of the run (the field's range: 1-10%), and the LR held the run
# back: the loss fell faster (per step) over the second half of the warmup than over the first
# (and by >= 5% of its start), so it was learning as fast as the rising LR allowed. A loss curve at a fixed LR is
# convex, falling fastest first; one that falls faster later was waiting for its LR (the pathology
# suite's SGD MLP: -0.03 then -0.13 nats; a ResNet: -0.25 then -0.73; an Adam MLP under a 90%
# linear warmup: -0.74 then -0.92).
# Or it did not slow down as the LR rose: over the warmup's last quarter the loss fell >= 3% of
# its level and >= 0.75x the warmup's average quarter, where a healthy run's fall fades (a curve
# decaying with a time constant of half the warmup: 0.48x). A GPT with 80% warmup fell evenly,
# 0.9x, so it shows no acceleration either: an LM's first drop (the unigram statistics) is fast
# at any LR.
# A warmup over half the run is said even when the loss did not wait for it (info): the run had
# little time at its peak LR, so the schedule is not the one it was meant to be.
WARMUP_SHARE = 0.25
WARMUP_MOST = 0.5
WARMUP_ACCELERATION = 1.0
WARMUP_MIN_DROP = 0.05
WARMUP_STILL_FALLING = 0.03
WARMUP_UNSLOWED = 0.75


def warmup_too_long(run: RunData) -> Finding | None:
    warmup, total = run.warmup, run.max_steps
    loss = run.series(TRAIN_LOSS).finite()
    if not warmup or not total or warmup < WARMUP_SHARE * total or len(loss) < MIN_ROWS:
        return None
    inside = loss.steps <= warmup
    if inside.sum() < MIN_ROWS:
        return None
    start, middle, late, end = (level_at(loss, s) for s in (int(loss.steps[0]), warmup // 2, 3 * warmup // 4, warmup))
    first, second = start - middle, middle - end
    # per step: the start level is the median of the first points, so it stands for a later step
    # than the first one, and the first half is measured over fewer steps than the second
    start_step = int(loss.steps[min(1, len(loss) - 1)])
    first_steps = max(warmup // 2 - start_step, 1)
    accelerated = (second / (warmup - warmup // 2) >= WARMUP_ACCELERATION * max(first, 0.0) / first_steps
                   and second >= WARMUP_MIN_DROP * abs(start))
    average_quarter = (start - end) * warmup / 4 / max(warmup - start_step, 1)
    still_falling = late - end >= max(WARMUP_STILL_FALLING * abs(late), WARMUP_UNSLOWED * average_quarter)
    if not (accelerated or still_falling):
        if warmup < WARMUP_MOST * total:
            return None
        return Finding("warmup_too_long", Severity.INFO, "the warmup takes most of the run",
                       f"the LR warmed up over {warmup} of {total} steps ({warmup / total:.0%}); the loss did not "
                       f"wait for it ({fmt(start)} -> {fmt(middle)} over its first half, -> {fmt(end)} by its end), "
                       "but the run spent little time at its peak LR.",
                       f"shorten schedule.warmup (now {run.cfg('schedule.warmup')}) to 1-10% of trainer.max_steps.")
    return Finding("warmup_too_long", Severity.WARNING, "the warmup was far too long",
                   f"the LR warmed up over {warmup} of {total} steps ({warmup / total:.0%}); the loss fell "
                   f"{fmt(first)} over its first half ({fmt(start)} -> {fmt(middle)}) and {fmt(second)} over its "
                   f"second ({fmt(middle)} -> {fmt(end)}), {fmt(late - end)} of that in its last quarter: the run "
                   f"learned as fast as the rising LR let it.",
                   f"shorten schedule.warmup (now {run.cfg('schedule.warmup')}) to 1-10% of trainer.max_steps "
                   "(e.g. 0.05); post-LN transformers and large batches need the longer end of that range.")
