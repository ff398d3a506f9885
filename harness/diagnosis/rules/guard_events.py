"""Rules about what the guard had to do: skipped non-finite updates, skipped spikes, rollbacks, and
the samples it traced them to."""
from __future__ import annotations

from harness.attribution import describe_sample
from harness.diagnosis.advice import instability_fixes
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData

# outlier_samples: skipped updates whose samples stood out from their batch (harness/attribution.py);
# critical when it kept happening (this many) or the run stopped on it.
OUTLIER_CRITICAL = 3
DATA_FIX = ("inspect the samples named (a unit mix-up, a corrupt record, a NaN in a feature, an unscaled "
            "column) and fix or drop them in the dataset; clipping (clip=1.0) bounds what one sample can do, "
            "a lower LR does not fix the data")


def nonfinite_skips(run: RunData) -> Finding | None:
    events = run.events_of("skip_nonfinite")
    if not events:
        return None
    return Finding("nonfinite_skips", Severity.WARNING, "updates with NaN/Inf loss or gradients were skipped",
                   f"{len(events)} update(s) skipped by the guard at step(s) {_steps(events)}.",
                   _fix(run, events))


def loss_spikes(run: RunData) -> Finding | None:
    events = run.events_of("skip_spike")
    if not events:
        return None
    return Finding("loss_spikes", Severity.WARNING, "loss spikes were skipped by the guard",
                   f"{len(events)} update(s) whose loss jumped above mean + {run.cfg('guard.spike_zscore', 6)} "
                   f"std of the recent losses, at step(s) {_steps(events)}.",
                   _fix(run, events))


def rollbacks(run: RunData) -> Finding | None:
    events = run.events_of("rollback")
    if not events:
        return None
    data = all(e.get("data_cause") for e in events)
    return Finding("rollbacks", Severity.WARNING, "the guard rolled the run back to a checkpoint",
                   f"{len(events)} rollback(s); the last: {events[-1].get('message', '')}.",
                   DATA_FIX + "." if data else "bad updates came in bursts: " + instability_fixes(run))


def outlier_samples(run: RunData) -> Finding | None:
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
                   f"their batch: {shown}{more} (steps {_steps(traced)}).",
                   DATA_FIX + ".")


def _fix(run: RunData, events: list[dict]) -> str:
    """Name the data when the skipped updates were traced to samples that stood out."""
    if any(e.get("data_cause") for e in events):
        return "the skipped updates held samples that stood out (outlier_samples names them): " + DATA_FIX + "."
    return "the guard kept the run alive, but the cause remains: " + instability_fixes(run)


def _steps(events: list[dict]) -> str:
    steps = [str(e.get("step")) for e in events]
    return ", ".join(steps[:8]) + (f" and {len(steps) - 8} more" if len(steps) > 8 else "")
