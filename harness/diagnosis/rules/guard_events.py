"""Rules about what the guard had to do: skipped non-finite updates, skipped spikes, rollbacks."""
from __future__ import annotations

from harness.diagnosis.advice import instability_fixes
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.curves import recovered_blowup
from harness.diagnosis.signals import fmt

DATA_FIX = ("inspect the samples named (a unit mix-up, a corrupt record, a NaN in a feature, an unscaled "
            "column) and fix or drop them in the dataset; clipping (clip=1.0) bounds what one sample can do, "
            "a lower LR does not fix the data")


def nonfinite_skips(run: RunData) -> Finding | None:
    events = run.events_of("skip_nonfinite")
    if not events:
        return None
    return Finding("nonfinite_skips", Severity.WARNING, "updates with NaN/Inf loss or gradients were skipped",
                   f"{len(events)} update(s) skipped by the guard at step(s) {steps_of(events)}.",
                   _fix(run, events))


def loss_spikes(run: RunData) -> Finding | None:
    events = run.events_of("skip_spike")
    if not events:
        return _unguarded_spike(run)
    return Finding("loss_spikes", Severity.WARNING, "loss spikes were skipped by the guard",
                   f"{len(events)} update(s) whose loss jumped above mean + {run.cfg('guard.spike_zscore', 6)} "
                   f"std of the recent losses, at step(s) {steps_of(events)}.",
                   _fix(run, events))


def _unguarded_spike(run: RunData) -> Finding | None:
    """One update's loss far above where the untrained model started, which the run then learned
    through: worth knowing (a clip or the guard bounds the next one), not a divergence."""
    blowup = recovered_blowup(run)
    if blowup is None:
        return None
    step, value, start, what = blowup
    return Finding("loss_spikes", Severity.INFO, "one update's loss spiked, and the run learned through it",
                   f"one update's loss reached {fmt(value)} in the window ending at step {step}, {fmt(value / start)}x "
                   f"{what} = {fmt(start)}; the run then came back to near its best.",
                   "nothing is needed for this run; clip=1.0 or guard=default bound what one batch can do to a "
                   "later one.")


def rollbacks(run: RunData) -> Finding | None:
    events = run.events_of("rollback")
    if not events:
        return None
    data = all(e.get("data_cause") for e in events)
    return Finding("rollbacks", Severity.WARNING, "the guard rolled the run back to a checkpoint",
                   f"{len(events)} rollback(s); the last: {events[-1].get('message', '')}.",
                   DATA_FIX + "." if data else "bad updates came in bursts: " + instability_fixes(run))


def _fix(run: RunData, events: list[dict]) -> str:
    """Name the data when the skipped updates were traced to samples that stood out."""
    if any(e.get("data_cause") for e in events):
        return "the skipped updates held samples that stood out (outlier_samples names them): " + DATA_FIX + "."
    return "the guard kept the run alive, but the cause remains: " + instability_fixes(run)


def steps_of(events: list[dict]) -> str:
    steps = [str(e.get("step")) for e in events]
    return ", ".join(steps[:8]) + (f" and {len(steps) - 8} more" if len(steps) > 8 else "")
