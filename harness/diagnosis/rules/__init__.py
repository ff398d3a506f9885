"""Every diagnosis rule, and `diagnose` to run them all. A rule takes the loaded run and returns
one Finding or None; rules are independent, so a run can carry several findings."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules import curves, data_order, eval_mode, gradients, guard_events, numerics, schedule

Rule = Callable[[RunData], "Finding | None"]

RULES: tuple[Rule, ...] = (
    curves.diverging,
    curves.plateau_at_chance,
    curves.plateau_at_prior,
    curves.oscillating,
    curves.overfitting,
    curves.underfitting,
    curves.slow_progress,
    eval_mode.bn_eval_gap,
    data_order.epoch_boundary_jumps,
    gradients.exploding_gradients,
    gradients.vanishing_gradients,
    gradients.dead_relu,
    gradients.clip_pinned,
    gradients.clip_never_reached,
    gradients.weight_norm_runaway,
    gradients.unused_parameters,
    numerics.fp16_underflow,
    numerics.fp16_overflow_skips,
    guard_events.nonfinite_skips,
    guard_events.loss_spikes,
    guard_events.rollbacks,
    schedule.schedule_ended_early,
)


# Findings that describe where a run ended up, not why: "stuck at chance" is the symptom of a
# clip that shrinks every update 1000x, of dead units, of an LR too low. A finding from CAUSES next
# to a symptom explains it, so it is raised to the symptom's severity and listed first.
SYMPTOMS = frozenset({"plateau_at_chance", "plateau_at_prior", "underfitting"})
CAUSES = frozenset({"clip_pinned", "schedule_ended_early", "slow_progress", "dead_relu", "vanishing_gradients",
                    "fp16_underflow", "exploding_gradients"})


def diagnose(run: RunData) -> list[Finding]:
    """All findings, the most severe first; causes before the symptoms they explain, then rule order."""
    findings = [f for rule in RULES if (f := rule(run)) is not None]
    symptom_rank = min((f.severity.rank for f in findings if f.name in SYMPTOMS), default=None)
    if symptom_rank is not None:
        severity = list(Severity)[symptom_rank]
        findings = [replace(f, severity=severity) if f.name in CAUSES and f.severity.rank > symptom_rank else f
                    for f in findings]
    return sorted(findings, key=lambda f: (f.severity.rank, f.name in SYMPTOMS))
