"""Every diagnosis rule, and `diagnose` to run them all. A rule takes the loaded run and returns
one Finding or None; rules are independent, so a run can carry several findings."""
from __future__ import annotations

from collections.abc import Callable

from harness.diagnosis.findings import Finding
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


def diagnose(run: RunData) -> list[Finding]:
    """All findings, the most severe first (rule order breaks ties)."""
    findings = [f for rule in RULES if (f := rule(run)) is not None]
    return sorted(findings, key=lambda f: f.severity.rank)
