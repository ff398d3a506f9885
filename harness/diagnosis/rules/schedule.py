"""Rule about the LR schedule: did it finish decaying long before the run did?"""
from __future__ import annotations

import numpy as np

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.common import MIN_ROWS
from harness.diagnosis.signals import fmt

# "At the floor": within 1% of the LR range above the smallest LR of the run. A cosine schedule
# spends its last ~6% there, linear its last ~1%, poly(power 2) its last 10%.
FLOOR_TOLERANCE = 0.01
# Flagged when the LR sat at its floor for the last quarter of the run or more: those updates
# barely move the weights, and the schedule was meant to span the whole run.
FLAT_TAIL = 0.25


def schedule_ended_early(run: RunData) -> Finding | None:
    lr = run.series("train/lr").finite()
    if len(lr) < MIN_ROWS or run.events_of("rollback"):  # a rollback's LR cut is not the schedule's
        return None
    peak, floor = float(lr.values.max()), float(lr.values.min())
    if floor >= peak or lr.values[-1] > floor + FLOOR_TOLERANCE * (peak - floor):
        return None
    above = np.nonzero(lr.values > floor + FLOOR_TOLERANCE * (peak - floor))[0]
    reached = int(lr.steps[above[-1] + 1]) if len(above) else int(lr.steps[0])
    total = run.max_steps or int(lr.steps[-1])
    tail = (total - reached) / total
    if tail < FLAT_TAIL:
        return None
    return Finding("schedule_ended_early", Severity.WARNING, "the LR schedule ended long before the run",
                   f"the LR reached its floor {fmt(floor)} (peak {fmt(peak)}) at step {reached} and stayed there "
                   f"for the last {tail:.0%} of the {total} steps.",
                   "the decay should end at trainer.max_steps: a schedule length set on its own must match it; "
                   "with schedule=poly a lower schedule.power; or end the run where the LR bottoms out "
                   "(trainer.max_steps).")
