"""Every diagnosis rule, and `diagnose` to run them all. A rule takes the loaded run and returns
one Finding or None; rules are independent, so a run can carry several findings."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from harness.core.metric_names import TRAIN_LOSS, VAL_LOSS
from harness.diagnosis.findings import Finding, Remedy, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.outcome import held_to_outcome, outcome, untold
from harness.diagnosis.rules import (attention, capacity, code, curves, data_order, eval_mode, gradients,
                                     guard_events, metrics, numerics, objective, outliers, output, schedule, setup,
                                     splits, weight_decay)

Rule = Callable[[RunData], "Finding | None"]

RULES: tuple[Rule, ...] = (  # setup mistakes first: among findings of one severity they come first
    code.probabilities_into_logits_loss,  # causes at a line of the user's code, measured before any update
    code.relu_into_logits_loss,
    code.softmax_over_one,
    code.broadcast_target,
    code.detached_term,
    code.zero_gradient_op,
    code.unguarded_log,
    code.clamped_logits,
    code.no_nonlinearity,
    setup.frozen_parameters,
    setup.val_train_overlap,
    splits.split_mismatch,
    output.output_activation,  # before the inputs: the model cannot express the answer whatever its inputs
    metrics.frozen_metric,  # what the metric reads never changed: an output read the wrong way, before its symptoms
    setup.unscaled_targets,  # before the inputs: a regression stuck at its prior is most often its targets' scale
    setup.unnormalised_inputs,
    objective.posterior_collapse,  # the objective's own failures, before what the optimiser shows beside them
    objective.representation_collapse,
    objective.drowned_part,
    numerics.forward_overflow,  # before what a non-finite loss looks like: diverging
    numerics.fp16_underflow,  # the precision config's own cause, before the vanishing gradients it makes
    curves.diverging,
    curves.plateau_at_chance,
    curves.plateau_at_prior,
    curves.oscillating,
    curves.overfitting,
    capacity.capacity_limit,
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
    numerics.fp16_overflow_skips,
    guard_events.nonfinite_skips,
    guard_events.loss_spikes,
    guard_events.rollbacks,
    outliers.outlier_samples,
    schedule.schedule_ended_early,
    schedule.warmup_too_long,
    weight_decay.weight_decay_collapse,
    attention.attention_entropy_collapse,
)
RULE_NAMES = frozenset(rule.__name__ for rule in RULES)


# Findings in three tiers. SYMPTOMS say where a run ended up, not why: "stuck at chance". CAUSES
# say why: a clip that shrinks every update 1000x, dead units, a schedule at its floor. In between,
# slow_progress is the symptom of a pinned clip or a spent schedule and the cause of a plateau. A
# finding is raised to the severity of any finding of a later tier beside it (the thing it
# explains) and listed before it.
CODE_CAUSES = ("probabilities_into_logits_loss", "relu_into_logits_loss", "softmax_over_one", "broadcast_target",
               "detached_term", "zero_gradient_op", "unguarded_log", "clamped_logits", "no_nonlinearity")
SYMPTOMS = frozenset({"plateau_at_chance", "plateau_at_prior", "underfitting"})
INTERMEDIATE = frozenset({"slow_progress"})
CAUSES = frozenset({"clip_pinned", "schedule_ended_early", "dead_relu", "vanishing_gradients", "fp16_underflow",
                    "exploding_gradients", "warmup_too_long", "weight_decay_collapse", "frozen_parameters",
                    "unnormalised_inputs", "attention_entropy_collapse", "outlier_samples", "output_activation",
                    "capacity_limit", "unscaled_targets", "split_mismatch", "posterior_collapse",
                    "representation_collapse", "drowned_part", "forward_overflow", *CODE_CAUSES})


# Findings outside that chain that particular causes explain: inputs 100x too large, targets far
# from standard units, a few huge samples or an output activation that normalises zeros blow the
# loss up, and the LR fix `diverging` offers is the wrong one for all four; a few huge samples
# averaged into batch norm's running statistics break eval mode, and their batches are the guard's
# loss spikes; splits prepared differently make the val loss climb while the train loss falls, which
# is no memorising; a collapsed posterior makes a VAE decode every input to the same output.
EXPLAINED_BY = {"diverging": frozenset({"unnormalised_inputs", "outlier_samples", "output_activation",
                                        "unscaled_targets", "forward_overflow"}),
               "bn_eval_gap": frozenset({"outlier_samples"}),
               "overfitting": frozenset({"split_mismatch"}),
               "loss_spikes": frozenset({"outlier_samples"}),
               "representation_collapse": frozenset({"posterior_collapse"})}
TIERS = (CAUSES, INTERMEDIATE, SYMPTOMS)
# Findings that describe the curves' shape, not a cause: on a run that learned and ended near its
# best they are infos (outcome.held_to_outcome).
SHAPES = SYMPTOMS | INTERMEDIATE | {"oscillating", "loss_spikes"}
# Findings that claim a bad outcome (a loss that runs away, a val loss that climbs): on a run that
# learned and ended near its best its own evals contradict them, so they follow the findings the
# outcome does not contradict (dead units, a pinned clip), at the same severity.
OUTCOME_CLAIMS = frozenset({"diverging", "overfitting"})
# Causes in the user's data code: while one is critical, no training change is tried; it would tune
# the model to a task the user did not mean (a run trained on one class "healed" by a new init).
DATA_CODE_CAUSES = frozenset({"split_mismatch"})


def _tier(finding: Finding) -> int | None:
    """0 for causes, 1 for slow_progress, 2 for symptoms, None for findings outside the chain."""
    for tier, names in enumerate(TIERS):
        if finding.name in names:
            return tier
    return None


def _explains(cause: Finding, other: Finding) -> bool:
    """Whether `cause` is a reason for `other`: earlier in the chain, or named in EXPLAINED_BY."""
    if cause.name in EXPLAINED_BY.get(other.name, ()):
        return True
    tier = _tier(cause)
    return tier is not None and (_tier(other) or 0) > tier


# What a remedy may not change under the user's own objective (loss._target_, loss.function=model):
# the loss reads the model's output and the batch in ways the harness does not know, so the output's
# activation and the inputs' or targets' scaling are the objective's to decide.
OBJECTIVE_OWNED = ("output_activation=", "data.standardize=", "data.standardize_targets=", "loss.")


# Rules that compare loss levels by ratio (a rise to 1.5x the start, an end within 5% of the prior):
# meaningless for an objective whose loss reaches 0 or below (a negative similarity, a bound), so
# such a run is not judged by them; a loss that went non-finite, or a run the guard stopped, still is.
LEVEL_RULES = frozenset({"diverging", "oscillating", "overfitting", "underfitting", "slow_progress",
                         "plateau_at_chance", "plateau_at_prior", "capacity_limit"})


def _fits_objective(remedy: Remedy) -> bool:
    return remedy.any_objective or not any(o.startswith(OBJECTIVE_OWNED) for o in remedy.overrides)


def signed_loss(run: RunData) -> bool:
    """The user's objective logged a loss at or below 0: its levels have no ratios."""
    if not run.summary.get("user_loss"):
        return False
    logged = [run.series(TRAIN_LOSS).values, run.series(VAL_LOSS, kind="eval").values]
    return any((values[np.isfinite(values)] <= 0).any() for values in logged)


def _judged(run: RunData, finding: Finding) -> bool:
    if finding.name not in LEVEL_RULES:
        return True
    nonfinite = not all(np.isfinite(run.series(key, kind).values).all()
                        for key, kind in ((TRAIN_LOSS, "train"), (VAL_LOSS, "eval")))
    return finding.name == "diverging" and (nonfinite or run.summary.get("status") == "diverged")


def diagnose(run: RunData) -> list[Finding]:
    """All findings, the most severe first; within a severity, what the rules judged more severe
    first (the outcome caps, it does not reorder), then what the outcome does not contradict, causes
    before what they explain, then rule order. Rules named in the run's `diagnose.ignore` (a setup
    the user chose on purpose) are not run. Under the user's own objective, remedies that change
    the loss, its targets or the output are not offered."""
    ignored = set(run.cfg("diagnose.ignore") or ())
    findings = [f for rule in RULES if rule.__name__ not in ignored and (f := rule(run)) is not None]
    if run.summary.get("user_loss"):
        findings = [replace(f, remedies=tuple(filter(_fits_objective, f.remedies))) for f in findings]
    if signed_loss(run):
        findings = [f for f in findings if _judged(run, f)]
    raised = []
    for f in findings:
        explained = [g.severity.rank for g in findings if _explains(f, g)]
        if explained and min(explained) < f.severity.rank:
            f = replace(f, severity=list(Severity)[min(explained)])
        raised.append(f)

    def order(f: Finding) -> int:
        """Within a severity: along the chain; a finding explained from outside it comes last."""
        if any(g.name in EXPLAINED_BY.get(f.name, ()) for g in findings):
            return len(TIERS)
        return _tier(f) or 0

    ended = outcome(run)
    if not any(f.severity is not Severity.INFO for f in raised) and (told := untold(run, ended)) is not None \
            and told.name not in ignored:
        raised.append(told)  # a run that did not work is never "No pathology found"
    held = held_to_outcome(ended, raised, SHAPES)
    judged = {id(h): f.severity.rank for h, f in zip(held, raised)}  # the outcome caps a severity, keeps the order
    worked = ended is not None and not ended.bad
    return sorted(held, key=lambda f: (f.severity.rank, judged[id(f)], worked and f.name in OUTCOME_CLAIMS,
                                       order(f)))
