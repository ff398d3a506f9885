"""Rule about a few training samples far out of line with the rest (a unit mix-up in some rows, a
corrupt record): the cause is the data, so the fix is the data, not the LR."""
from __future__ import annotations

import numpy as np

from harness.attribution import describe_sample
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.guard_events import DATA_FIX, steps_of
from harness.diagnosis.signals import fmt
from harness.metric_names import TRAIN_LOSS, VAL_LOSS

# From the guard: skipped updates whose samples stood out from their batch (harness/attribution.py);
# critical when it kept happening (this many) or the run stopped on it.
OUTLIER_CRITICAL = 3
# Without skips: the training split holds inputs over 10x the median input norm, or not finite
# (`input_outliers`, measured when the run is built), few of them (<= 10% of those read: more is
# the data's own spread, not a few bad rows), and they cost the training loss: its median over the
# second half is >= 1.3x the last val loss (the batches that hold them dominate their window's
# mean; the val split does not hold them). In the suite, 1-5% of rows scaled x300-1e4 put it at
# 1.4-3.7x while the guard's z-score, fed the same losses, never fired. Healthy runs reach up to
# 1.3x without outliers (a ResNet in train mode), which is why the outliers must be found first.
OUTLIER_MAX_SHARE = 0.10
TRAIN_OVER_VAL = 1.3


def outlier_samples(run: RunData) -> Finding | None:
    return _from_skips(run) or _from_inputs(run)


def _from_skips(run: RunData) -> Finding | None:
    skips = [e for e in run.events if e.get("kind", "").startswith("skip_") and "data_cause" in e]
    traced = [e for e in skips if e["data_cause"]]
    if not traced or 2 * len(traced) < len(skips):
        return None
    samples: dict[int, dict] = {}
    for event in traced:
        for s in event.get("samples") or []:
            samples.setdefault(int(s["index"]), s)
    shown = ", ".join(f"#{describe_sample(s)}" for s in list(samples.values())[:6])
    more = f" and {len(samples) - 6} more" if len(samples) > 6 else ""
    stopped = run.summary.get("status") == "diverged"
    severity = Severity.CRITICAL if len(traced) >= OUTLIER_CRITICAL or stopped else Severity.WARNING
    return Finding("outlier_samples", severity, "a few training samples blow up the updates that hold them",
                   f"{len(traced)} of {len(skips)} skipped update(s) held samples that stood out from the rest of "
                   f"their batch: {shown}{more} (steps {steps_of(traced)}).",
                   DATA_FIX + ".")


def _from_inputs(run: RunData) -> Finding | None:
    found = run.summary.get("input_outliers") or {}
    if not found.get("count") or found["count"] > OUTLIER_MAX_SHARE * found["checked"]:
        return None
    train, val = run.series(TRAIN_LOSS).finite(), run.series(VAL_LOSS, kind="eval").finite()
    if len(train) < 2 or not len(val):
        return None
    level, last_val = float(np.median(train.values[len(train) // 2:])), float(val.values[-1])
    if level < TRAIN_OVER_VAL * last_val:
        return None
    shown = ", ".join(f"#{int(s['index'])} (input norm {fmt(s['input_norm'])})" for s in found["samples"][:6])
    return Finding("outlier_samples", Severity.WARNING, "a few training samples are far out of line with the rest",
                   f"{found['count']} of {found['checked']} training inputs read when the run was built have a norm "
                   f"over 10x the median ({fmt(found['median_norm'])}) or are not finite: {shown}; the batches holding "
                   f"them lift the train loss to {fmt(level)} (median, second half of the run) against {fmt(last_val)} "
                   f"on the validation samples.",
                   DATA_FIX + ".")
