"""Rules about how the run was set up, read off the facts measured when it was built
(summary.json's `parameters`, `split_overlap`, `input_stats`) and its first update: mistakes
that no curve shows clearly, or that every curve shows without saying why."""
from __future__ import annotations

import math

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.remedies import standardised_inputs, standardised_targets
from harness.diagnosis.rules.common import learned_clearly, name_some, peak_lr_update_ratio
from harness.diagnosis.rules.curves import CHANCE_BAND, SLOW_UPDATE_RATIO
from harness.diagnosis.signals import fmt
from harness.core.metric_names import TRAIN_LOSS_FIRST

# Frozen: more than half of the model's parameters have requires_grad=False. Intended freezing
# (a linear probe, a fine-tune of the head only) is declared with diagnose.ignore=[frozen_parameters].
FROZEN_SHARE = 0.5
# Val/train overlap: an honest split shares no input with its training split, save the odd
# duplicate (a corpus' boilerplate: the stdlib corpus has 1 in 2,048 checked windows). Flagged at
# >= 2% of the validation split, on at least OVERLAP_MIN_FOUND copies actually found (an estimate
# extrapolated from one hit is noise).
OVERLAP_SHARE = 0.02
OVERLAP_MIN_FOUND = 8
# Un-normalised inputs: some input feature has |median| or robust std above 10 (standardised data: ~1;
# images in [0, 1]: <= 1; pixels in [0, 255]: ~100), and it hurt: the first update's loss was more
# than twice where an untrained model starts (ln K, or the prior for regression): the first layer's
# outputs were tens of times larger than its init assumed. Without that, an info: Adam or a
# saturating tanh can absorb the scale at the first update (first loss 1.0-1.6x ln K in the suite)
# and still train slowly; a model that normalises its own inputs (a LayerNorm first) is fine. A
# critical when it hurt and the run never got back below that start: its best val loss is no better
# than an untrained model's, and no other cause is as plain. Its remedy comes with it at any
# severity: an info beside a divergence it explains is raised to critical, and acted on then.
INPUT_SCALE = 10.0
FIRST_LOSS_OVER_START = 2.0
# Unscaled targets: the regression targets' |median| or robust std (interquartile range / 1.349, a
# normal's std) above 10, the inputs' bar: standardised targets ~1, probabilities and labels in [0, 1].
# A critical when the best val loss never got clearly below the loss of predicting their mean (the
# band of RECOVERED_BY, below), over the whole run or, live, over at least half of it.
TARGET_SCALE = INPUT_SCALE
IQR_PER_STD = 1.349
NEVER_AFTER = 0.5  # a live eval says "never beat the prior" from half the run on
# Recovered: the best val loss got clearly below that start, by more than the band in which
# plateau_at_chance and plateau_at_prior call a run stuck where it started (curves.CHANCE_BAND).
RECOVERED_BY = CHANCE_BAND


def frozen_parameters(run: RunData) -> Finding | None:
    counts = run.summary.get("parameters") or {}
    frozen, trainable = counts.get("frozen", 0), counts.get("trainable", 0)
    if not frozen or frozen < FROZEN_SHARE * (frozen + trainable):
        return None
    modules = list(counts.get("frozen_modules") or [])
    return Finding("frozen_parameters", Severity.WARNING, "most of the model is frozen (requires_grad=False)",
                   f"{frozen:,} of {frozen + trainable:,} parameters ({frozen / (frozen + trainable):.0%}) never "
                   f"train; frozen: {name_some(modules) or 'parameters spread over many modules'}.",
                   "find the requires_grad_(False) (a fine-tuning recipe, a loaded checkpoint, a `freeze` helper) "
                   "and drop it; if only those layers are meant to train, say so with "
                   "diagnose.ignore=[frozen_parameters].")


def val_train_overlap(run: RunData) -> Finding | None:
    overlap = run.summary.get("split_overlap") or {}
    found, share = overlap.get("val_in_train", 0), overlap.get("share", 0.0)
    if found < OVERLAP_MIN_FOUND or share < OVERLAP_SHARE:
        return None
    hashed = overlap.get("train_hashed", 0)
    scope = "the whole training split" if hashed >= overlap.get("train_samples", 0) else (
        f"{hashed:,} of its {overlap.get('train_samples', 0):,} samples")
    severity = Severity.CRITICAL if share >= 0.5 else Severity.WARNING
    return Finding("val_train_overlap", severity, "validation samples are also training samples",
                   f"{found} of {overlap.get('val_checked')} checked validation inputs have an exact copy in "
                   f"the training split ({scope} hashed when the run was built): ~{share:.0%} of the validation "
                   "split. Its loss measures memory, not generalisation: it falls with the train loss while "
                   "unseen data may get worse.",
                   "split before any augmentation or oversampling, deduplicate across the splits (by content "
                   "hash), and split by source (user, document, patient) when samples come in groups; "
                   "until then the val loss, best.pt and early stopping cannot be trusted.")


def _input_scale(run: RunData) -> float:
    """The largest input feature's |median| or robust std (0 when not measured)."""
    stats = run.summary.get("input_stats") or {}
    return max(stats.get("max_abs_feature_median", 0.0), stats.get("max_feature_spread", 0.0))


def raw_inputs(run: RunData) -> bool:
    """Some input feature is far from standard units (|median| or robust std above INPUT_SCALE)."""
    return _input_scale(run) > INPUT_SCALE


def unnormalised_inputs(run: RunData) -> Finding | None:
    stats = run.summary.get("input_stats") or {}
    start, what = _expected_start(run)
    first = run.series(TRAIN_LOSS_FIRST).finite()
    if not raw_inputs(run):
        return None
    if start is None:
        return _scale_not_judged(stats)
    if not len(first):
        return None
    first_loss = float(first.values[0])
    hurt = first_loss > FIRST_LOSS_OVER_START * start
    best = run.summary.get("best_val_loss")
    finite_best = isinstance(best, (int, float)) and math.isfinite(best)
    never_recovered = hurt and not (finite_best and best < (1 - RECOVERED_BY) * start)
    severity = (Severity.CRITICAL if never_recovered and not _weights_barely_moved(run) else
                Severity.WARNING if hurt and not learned_clearly(run) else Severity.INFO)
    return Finding("unnormalised_inputs", severity, "the inputs are not normalised",
                   f"{input_scale_text(stats)}; the first update's loss was {fmt(first_loss)}, {fmt(first_loss / start)}x "
                   f"{what} {fmt(start)} where an untrained model starts"
                   + ("." if hurt else " (the scale did not show there; a model that normalises its own inputs "
                      "is fine).")
                   + ("" if not never_recovered else f" The best val loss, {fmt(best)}, never got below that start."
                      if finite_best else " No val loss was finite."),
                   "data.standardize=true scales each input feature by the training split's mean and std (the "
                   "same statistics for validation and test); or standardise in the dataset or a transform "
                   "(images: scale to [0, 1], then per-channel mean/std).",
                   standardised_inputs(run))


def input_scale_text(stats: dict) -> str:
    """The inputs' scale as the evidence states it (summary.json's `input_stats`)."""
    return (f"input features reach |median| {fmt(stats['max_abs_feature_median'])} and robust std "
            f"{fmt(stats['max_feature_spread'])} (rms {fmt(stats.get('rms', math.nan))}; standardised inputs: ~1)")


def _scale_not_judged(stats: dict) -> Finding:
    """Under the user's own objective: no loss is known where an untrained model starts, so whether
    the scale hurt is not judged, and the batches are the objective's to scale. An info, raised like
    any cause beside a symptom it explains."""
    return Finding("unnormalised_inputs", Severity.INFO, "the inputs are not normalised",
                   f"{input_scale_text(stats)}, measured on what the model's forward is given. Your objective's loss has no "
                   "known value where an untrained model starts, so whether the scale hurt is not judged; units "
                   "behind such inputs saturate or die when it did.",
                   "standardise the features in your dataset or a transform (your objective reads whole batches, so "
                   "data.standardize is refused beside it; images: scale to [0, 1], then per-channel mean/std).")


def _weights_barely_moved(run: RunData) -> bool:
    """Updates too small to leave where the run started (slow_progress's bar): a run that never
    got below its first loss says nothing then about its inputs' scale."""
    ratio = peak_lr_update_ratio(run)
    return ratio is not None and ratio <= SLOW_UPDATE_RATIO


def unscaled_targets(run: RunData) -> Finding | None:
    """Regression targets far from standard units (summary.json's `target_percentiles`, pooled over
    target elements). Critical when the run never beat predicting their mean: nothing else is as
    plain a cause. Otherwise an info, since a run can still fit them; as a cause, it is raised to the
    severity of a plateau, slow progress or divergence beside it, and its remedy comes with it at
    any severity."""
    percentiles = run.summary.get("target_percentiles")
    if run.summary.get("task") != "regression" or run.summary.get("loss_function") == "bce" or not percentiles:
        return None
    median = percentiles[len(percentiles) // 2]
    spread = (percentiles[3 * len(percentiles) // 4] - percentiles[len(percentiles) // 4]) / IQR_PER_STD
    if max(abs(median), spread) <= TARGET_SCALE:
        return None
    prior = run.summary.get("val_prior_loss") or run.summary.get("prior_loss")
    best = run.summary.get("best_val_loss")
    finite_best = isinstance(best, (int, float)) and math.isfinite(best)
    never_learned = bool(prior) and _judged_over_the_run(run) and not (
        finite_best and best < (1 - RECOVERED_BY) * prior)
    return Finding("unscaled_targets", Severity.CRITICAL if never_learned else Severity.INFO,
                   "the regression targets are not scaled",
                   f"the training targets have median {fmt(median)} and robust std {fmt(spread)} (they span "
                   f"{fmt(percentiles[0])} to {fmt(percentiles[-1])}); a freshly initialised output layer makes "
                   "values near +-1, so the weights must first grow that far: slowly under Adam (~lr per step), "
                   "explosively under SGD (gradients as large as the targets)"
                   + (f". The best val loss, {fmt(best)}, never got below {fmt(prior)}, the loss of predicting the "
                      "targets' mean." if never_learned and finite_best else
                      ". No val loss was finite." if never_learned else "."),
                   "data.standardize_targets=true trains on the targets in standard units and maps the model's "
                   "outputs back, so every loss stays in the targets' units; or scale the targets in the dataset "
                   "(and predictions back).", standardised_targets(run, raw_inputs(run)))


def _judged_over_the_run(run: RunData) -> bool:
    """Whether "never" can be said yet: the run has ended, or a live eval has seen at least
    NEVER_AFTER of it (an output layer growing towards large targets can spend its first evals
    above their prior and still fit them well)."""
    if run.summary.get("status") != "running":
        return True
    return run.summary.get("steps", 0) >= NEVER_AFTER * (run.summary.get("max_steps") or 0)


def _expected_start(run: RunData) -> tuple[float | None, str]:
    """Where a well-initialised model's loss is expected to start, named: ln K, or the targets'
    prior for regression (curves.untrained_start is where this run's model did start)."""
    if run.summary.get("chance_loss"):
        return float(run.summary["chance_loss"]), "chance ln K ="
    if run.summary.get("prior_loss"):
        return float(run.summary["prior_loss"]), "the loss of predicting the targets' mean ="
    return None, ""
