"""Rule about a few training samples far out of line with the rest (a unit mix-up in some rows, a
corrupt record): the cause is the data, so the fix is the data, not the LR."""
from __future__ import annotations

import numpy as np

from harness.core.sample_records import describe_sample
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.eval_mode import MODE_GAP_RATIO, mode_gap
from harness.diagnosis.rules.guard_events import DATA_FIX, steps_of
from harness.diagnosis.signals import fmt
from harness.core.metric_names import GRAD_NORM_MAX, GRAD_NORM_PRECLIP, TRAIN_LOSS, VAL_LOSS

# From the guard: skipped updates whose samples stood out from their batch (harness/training/attribution.py);
# critical when it kept happening (this many) or the run stopped on it.
OUTLIER_CRITICAL = 3
# Without skips: the training split holds samples far out of line with the rest (`input_outliers`:
# an input norm over 10x the median; `target_outliers`, regression: a target 3 interquartile
# ranges past its quartiles; or not finite), measured when the run is built, few of them (<= 10%
# of those read: more is the data's own spread, not a few bad rows), and they show in the run:
# - they cost the training loss: its median over the second half is >= 1.3x the last val loss (the
#   batches that hold them dominate their window's mean; the val split does not hold them). In the
#   suite, 1-5% of rows scaled x300-1e4 put it at 1.4-3.7x while the guard's z-score, fed the same
#   losses, never fired. Healthy runs reach up to 1.3x without outliers (a ResNet in train mode),
#   which is why the outliers must be found first;
# - or clipping hid that: at least 3 log windows' largest pre-clip gradient norm is >= 10x the
#   median update's (exploding_gradients' ratio), the clip shrinking those updates to its threshold;
# - or batch norm averaged them into its running statistics: the model fails on its own training
#   samples in eval mode (bn_eval_gap's measure), which it does not in train mode.
OUTLIER_MAX_SHARE = 0.10
TRAIN_OVER_VAL = 1.3
SPIKE_RATIO = 10.0
SPIKE_WINDOWS = 3



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
    inputs, targets = run.summary.get("input_outliers"), run.summary.get("target_outliers")
    if _few(inputs):
        shown = ", ".join(f"#{int(s['index'])} (input norm {fmt(s['input_norm'])})" for s in inputs["samples"][:6])
        found = (f"{inputs['count']} of {inputs['checked']} training inputs read when the run was built have a norm "
                 f"over 10x the median ({fmt(inputs['median_norm'])}) or are not finite: {shown}")
    elif _few(targets):
        shown = ", ".join(f"#{int(s['index'])} (target {fmt(s['target'])})" for s in targets["samples"][:6])
        q1, q3 = targets["quartiles"]
        found = (f"{targets['count']} of {targets['checked']} regression targets read when the run was built lie "
                 f"over 3 interquartile ranges past their quartiles ({fmt(q1)}, {fmt(q3)}) or are not finite: {shown}")
    else:
        return None
    shown_in = _lifted_train_loss(run) or _clipped_spikes(run) or _batch_norm_gap(run)
    if shown_in is None:
        return None
    return Finding("outlier_samples", Severity.WARNING, "a few training samples are far out of line with the rest",
                   f"{found}; {shown_in}.", DATA_FIX + ".")


def _few(found: dict | None) -> bool:
    return bool(found and found.get("count")) and found["count"] <= OUTLIER_MAX_SHARE * found["checked"]


def _lifted_train_loss(run: RunData) -> str | None:
    train, val = run.series(TRAIN_LOSS).finite(), run.series(VAL_LOSS, kind="eval").finite()
    if len(train) < 2 or not len(val):
        return None
    level, last_val = float(np.median(train.values[len(train) // 2:])), float(val.values[-1])
    if level < TRAIN_OVER_VAL * last_val:
        return None
    return (f"the batches holding them lift the train loss to {fmt(level)} (median, second half of the run) against "
            f"{fmt(last_val)} on the validation samples")


def _clipped_spikes(run: RunData) -> str | None:
    clip = run.cfg("clip")
    peaks, typical = run.series(GRAD_NORM_MAX).finite(), run.series(GRAD_NORM_PRECLIP).finite()
    if not clip or not len(peaks) or not len(typical) or np.median(typical.values) <= 0:
        return None
    median = float(np.median(typical.values))
    spikes = peaks.values >= SPIKE_RATIO * median
    if spikes.sum() < SPIKE_WINDOWS:
        return None
    return (f"the updates holding them spike: {int(spikes.sum())} log windows' largest pre-clip gradient norm is "
            f">= {SPIKE_RATIO:g}x the median update's {fmt(median)} (up to {fmt(float(peaks.values.max()))}), and "
            f"clip={clip:g} hides them from the loss curve by shrinking those updates")


def _batch_norm_gap(run: RunData) -> str | None:
    gap = mode_gap(run)
    if gap is None or gap < MODE_GAP_RATIO:
        return None
    return (f"batch norm averaged them into its running statistics: in eval mode the model's loss on its own training "
            f"samples is {fmt(gap)}x its train-mode loss")
