"""The model's output activation against what reads it (summary.json's `output_activation`,
measured when the run is built): a range that holds the regression targets, logits for a
cross-entropy, a probability where the model makes one itself. A mismatch is a cause no LR, init or
hidden activation reaches: the model cannot express the answer, however it trains."""
from __future__ import annotations

import math

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.remedies import output_fix, standardised_inputs
from harness.diagnosis.rules.code import built_lines, in_your_code, quoted_line
from harness.diagnosis.rules.setup import input_scale_text, raw_inputs
from harness.diagnosis.signals import fmt

# Regression: the share of the training targets outside the activation's range. Past 1% the
# targets it cannot reach are a floor under the loss; past 10% that floor is most of what the
# model could still learn (a tenth of the targets missed by at least their distance to the range).
OUT_OF_REACH_WARNING = 0.01
OUT_OF_REACH_CRITICAL = 0.10
# The share of the logits on the first batch held exactly at the batch's lowest or highest value past
# which they are cut off (a continuous output ties there by chance almost never); too few values say
# nothing.
HELD_SHARE = 0.10
HELD_MIN_VALUES = 8


def output_activation(run: RunData) -> Finding | None:
    constant = _constant_output(run) or _no_gradient_at_the_output(run)
    out = run.summary.get("output_activation")
    task = run.summary.get("task")
    if constant:
        return constant
    if run.summary.get("user_loss"):  # the other checks read the output as the built-in loss does
        return _held_at_the_range(run, out)
    if task not in ("regression", "classification"):
        return None
    return (_module_mismatch(run, out, task) if out else None) or _held_logits(run, out)


def _module_mismatch(run: RunData, out: dict, task: str) -> Finding | None:
    """The output activation module against what reads it; it names the module and its cause, so
    it comes before the held-logits check, which also sees what such a module does."""
    where = f"`{out['module']}` ({out['type']}), called after the model's last layer with weights"
    if out.get("single_unit_softmax"):
        probability = task == "classification" or run.summary.get("loss_function") == "bce"
        target = "sigmoid" if probability and not out["read_by_loss"] else "identity"
        return _found(run, Severity.CRITICAL, "the output is a softmax over one unit: always 1",
                       f"{where}, normalises over a dimension of size 1, so it outputs 1 for every input and no "
                       "layer before it gets a gradient.",
                       "a probability of one class is a sigmoid; a regression output has no activation "
                       f"(output_activation={target} replaces it).", target)
    if task == "regression" and run.summary.get("loss_function") != "bce":
        return _unreachable_targets(run, out, where)
    # the cross-entropy and bce read logits
    return _not_logits(run, out, where) if out["read_by_loss"] else _not_a_probability(run, out, where)


def _constant_output(run: RunData) -> Finding | None:
    """The untrained model gave every sample of its first batch the same output and no weight a
    gradient (summary.json's `forward`): nothing it learns can change that. A constant output that
    still passes a gradient is a model that ignores its inputs (plateau_at_prior names that)."""
    forward = run.summary.get("forward") or {}
    where = forward.get("constant_output")
    if not where or forward.get("gradient_norm") != 0:
        return None
    if where.get("saturated"):
        return _saturated_output(run, where)
    out = run.summary.get("output_activation") or {}
    culprit = (f"`{where['module']}` ({where['type']})" if where["module"] else
               "the forward's own code (a function, not a module)")
    after = f", after `{where['after']}` ({where['after_type']}), whose output still varied," if where["after"] else ""
    evidence = (f"{_same_output(where)}{culprit}{after} makes it constant, and the loss passes no gradient to any "
                "weight (norm 0). The layers behind it get no signal, so units that look dead or gradients that look "
                "vanished beside this finding are its doing, and no LR, init or activation change reaches it."
                + quoted_line(run, "softmax_over_one", "saturated_op", module=where["module"]))
    fix = ("a probability of one class is a sigmoid over one unit, of one of several classes a softmax over the class "
           "dimension; a softmax or log-softmax over one unit, or along a dimension of size 1, is constant")
    replaceable = bool(where["module"]) and out.get("module") == where["module"]
    if not replaceable:
        return Finding("output_activation", Severity.CRITICAL, "the model's output is the same for every input",
                       evidence, fix + ": change it in the model's forward (or make it a module, which "
                       "output_activation can replace).")
    target = _constant_output_target(run, out)
    return Finding("output_activation", Severity.CRITICAL, "the model's output is the same for every input", evidence,
                   fix + f" (output_activation={target} replaces it).", output_fix(run, target, constant=True))


def _same_output(where: dict) -> str:
    """The evidence's opening for an output the untrained model gives every sample alike."""
    value = where.get("value")
    shown = f" ({value:.4g})" if value is not None else ""
    return f"before any update, every sample of the first batch gets the same output{shown} although their inputs differ: "


def _saturated_output(run: RunData, where: dict) -> Finding:
    """A constant output made by an activation driven into its flat tails: on the same inputs
    brought to unit scale it varies, so the cause is the size of what feeds it (inputs in raw
    units, a large init), not its form. Standardised inputs come first when the inputs are raw; a
    built-in loss that takes logits needs no activation there at all. The user's own objective reads
    whole batches and its own output, so there the fix is named, not applied."""
    out = run.summary.get("output_activation") or {}
    feeds = f"its inputs from `{where['after']}` ({where['after_type']})" if where["after"] else "its inputs"
    raw = raw_inputs(run)
    evidence = (f"{_same_output(where)}`{where['module']}` ({where['type']}) is saturated. "
                f"{feeds[0].upper() + feeds[1:]} reach "
                f"{fmt(where.get('input_max') or math.nan)}, where it is flat, so the loss passes no gradient to any "
                "weight (norm 0); the same inputs scaled to a largest magnitude of 1 give outputs that vary. "
                + _raw_note(run)
                + "Units that look dead or gradients that look vanished beside this finding are its doing."
                + quoted_line(run, "saturated_op", module=where["module"]))
    own = bool(run.summary.get("user_loss"))
    replaceable = not own and out.get("module") == where["module"] and bool(out.get("read_by_loss"))
    remedies = (standardised_inputs(run) if raw and not own else ()) + (
        output_fix(run, "identity") if replaceable else ())
    title = f"`{where['module']}` is saturated: the model's output is the same for every input"
    return Finding("output_activation", Severity.CRITICAL, title, evidence, _saturation_fix(own), remedies)


def _held_at_the_range(run: RunData, out: dict | None) -> Finding | None:
    """Under the user's own objective: many of the first batch's outputs sit exactly at an end of
    the output activation's range (a sigmoid's 0 or 1 in float32: pre-activations past +-17 to 88).
    Each one is saturated and passes (almost) no gradient, so those samples teach nothing; the cause
    is the size of what feeds it, as for an output saturated on every sample."""
    bounds = (run.summary.get("forward") or {}).get("output_bounds")
    if not bounds or bounds["values"] < HELD_MIN_VALUES:
        return None
    # the bounds are the model's output's: they are the activation's when the loss reads it (`_ends_at`)
    sides = [side for side in ("low", "high") if bounds[f"share_{side}"] >= HELD_SHARE and _ends_at(out, bounds, side)]
    if not sides:
        return None
    held = " and ".join(f"{bounds[f'share_{side}']:.0%} exactly {bounds[side]:.4g}" for side in sides)
    return Finding("output_activation", Severity.WARNING, "the model's output is saturated on many samples",
                   f"on the first batch, before any update, of the outputs of `{out['module']}` ({out['type']}), {held}: "
                   "the end of its range, where it is flat. A saturated output passes (almost) no gradient, so those "
                   "samples teach the model nothing. " + _raw_note(run), _saturation_fix(own=True))


def _saturation_fix(own: bool) -> str:
    """How to bring a saturated activation back: where the inputs are scaled depends on who reads the batch."""
    where = "in your dataset: your objective reads whole batches" if own else "data.standardize=true, or in the dataset"
    return (f"bring what feeds it to unit scale: standardise the inputs ({where}), or draw the layers before it "
            "smaller; a loss that applies the sigmoid or softmax itself (a cross-entropy or bce on logits) needs no "
            "activation here at all.")


def _raw_note(run: RunData) -> str:
    """What the inputs' scale says about pre-activations that large ('' for scaled inputs)."""
    return (f"The model's inputs are in raw units: {input_scale_text(run.summary['input_stats'])}, which is how its "
            "pre-activations got that large. " if raw_inputs(run) else "")


def _held_logits(run: RunData, out: dict | None) -> Finding | None:
    """Logits the built-in cross-entropy or bce reads that the untrained model's first batch holds
    at one value for many samples and classes (summary.json's `forward.output_bounds`): a ReLU or a
    clamp cuts them off, and a logit held there passes no gradient, so its class can never become
    likelier (or, at an upper bound, less likely) on those samples. A regression loss reads a range
    (`_unreachable_targets`). The culprit is the output activation module when its range ends at
    that value (it can be replaced), else the forward's own code."""
    if run.summary.get("task") == "regression" and run.summary.get("loss_function") != "bce":
        return None
    bounds = (run.summary.get("forward") or {}).get("output_bounds")
    if not bounds or bounds["values"] < HELD_MIN_VALUES:
        return None
    # held in one class position only: every sample's same output (a model blind to its inputs),
    # unless the output activation's own range ends there (a single logit through a ReLU)
    sides = [side for side in ("low", "high") if bounds[f"share_{side}"] >= HELD_SHARE
             and (bounds.get(f"positions_{side}", 1) > 1 or _ends_at(out, bounds, side))]
    if not sides:
        return None
    module = out if all(_ends_at(out, bounds, side) for side in sides) else None
    culprit = (f"`{module['module']}` ({module['type']}), called after the model's last layer with weights,"
               if module else "the forward's own code (a ReLU or clamp written as a function, not a module)")
    held = " and ".join(f"{bounds[f'share_{side}']:.0%} exactly {bounds[side]:.4g}, the batch's "
                        f"{'lowest' if side == 'low' else 'highest'} value" for side in sides)
    moves = " or ".join("likelier" if side == "low" else "less likely" for side in sides)
    evidence = (f"on the first batch, of the logits the loss reads, {held}: {culprit} cuts them off there. A logit "
                f"held at a cut passes no gradient, so its class cannot become {moves} on that sample however the "
                "run trains; units that look dead behind it are partly its doing.")
    fix = "the loss takes raw logits and applies the softmax (or sigmoid) itself: drop the activation or clamp on them"
    if module is None:  # the forward's own line that made the output, where the traced first step saw it
        return Finding("output_activation", Severity.WARNING, "the logits are cut off",
                       evidence + in_your_code(*run.summary.get("output_lines") or ()),
                       fix + " in the model's forward.")
    return _found(run, Severity.WARNING, "the logits are cut off", evidence,
                  fix + " (output_activation=identity replaces it).", "identity")


def _ends_at(out: dict | None, bounds: dict, side: str) -> bool:
    """Whether the output activation the loss reads has its range end where the logits are held."""
    return bool(out and out["read_by_loss"] and out[side] is not None
                and math.isclose(out[side], bounds[side], abs_tol=1e-6))


def _no_gradient_at_the_output(run: RunData) -> Finding | None:
    """No weight got a gradient from a finite loss, and the gradient already ended at or after the
    output layer (summary.json's `forward.gradient_stop`): whatever the inputs, nothing can train.
    A gradient that reached a module inside the model and ended there is a layer's doing (dead or
    saturated units), named by those rules."""
    forward = run.summary.get("forward") or {}
    stop = forward.get("gradient_stop")
    if not stop or forward.get("gradient_norm") != 0 or stop["reached"] not in (None, ""):
        return None
    layer = (f"`{stop['last_layer']}` ({stop['last_layer_type']}), the last layer with weights" if stop["last_layer"]
             else "the last layer with weights")
    where = ("the loss passes no gradient to the model's output (a loss of a detached, rounded or arg-maxed output, "
             "or one that does not read it)" if stop["reached"] is None else
             f"the gradient reaches the model's output but not {layer}: the forward's own code after that layer "
             "passes none (a softmax or log-softmax over one unit or along a dimension of size 1, a clamp it "
             "saturates, a rounding)")
    evidence = (f"before any update, the loss on the first batch is finite but no weight gets a gradient (norm 0): "
                f"{where}. The layers behind it get no signal, so units that look dead or gradients that look "
                "vanished beside this finding are its doing, and no LR, init or activation change reaches it.")
    return Finding("output_activation", Severity.CRITICAL, "no gradient reaches the model's output layer", evidence,
                   "a probability of one class is a sigmoid over one unit, of one of several classes a softmax over "
                   "the class dimension; the loss reads the output as computed (no detach, rounding or argmax on "
                   "its way): change it in the model's forward or the loss.")


def _constant_output_target(run: RunData, out: dict) -> str:
    """What replaces a constant output: raw logits where the built-in loss reads them; otherwise
    the probability the model meant to make (one class: a sigmoid; several: a softmax over them)."""
    if not run.summary.get("user_loss") and out.get("read_by_loss"):
        return "identity"
    return "sigmoid" if out.get("values_per_sample", out.get("units")) == 1 else "softmax"


def _unreachable_targets(run: RunData, out: dict, where: str) -> Finding | None:
    """A regression output whose range misses some of the targets: their error cannot fall."""
    percentiles = run.summary.get("target_percentiles")
    off_one = run.summary.get("target_rows_off_one")
    if out["type"] == "Softmax" and off_one is not None and off_one > OUT_OF_REACH_WARNING:
        return _rows_a_softmax_cannot_make(run, out, where, off_one, percentiles)
    low, high = _range(out)
    if not percentiles or (low == -math.inf and high == math.inf):
        return None
    outside = sum(1 for v in percentiles if v < low or v > high) / len(percentiles)
    if outside <= OUT_OF_REACH_WARNING:
        return None
    severity = Severity.CRITICAL if outside >= OUT_OF_REACH_CRITICAL else Severity.WARNING
    return _found(run, severity, "the output activation cannot reach the targets",
                   f"{where}, outputs values in [{low:.4g}, {high:.4g}]; ~{outside:.0%} of the training "
                   f"targets lie outside it (they span {percentiles[0]:.4g} to {percentiles[-1]:.4g}): their error "
                   "is a floor under the loss.",
                   "a regression output has no activation (output_activation=identity replaces it), or scale "
                   "the targets into its range.", "identity")


def _rows_a_softmax_cannot_make(run: RunData, out: dict, where: str, off_one: float,
                                percentiles: list[float] | None) -> Finding:
    """A softmax output's values sum to 1 for every sample: target rows that do not (several labels
    on at once, none on, or values of any size) are out of its reach."""
    severity = Severity.CRITICAL if off_one >= OUT_OF_REACH_CRITICAL else Severity.WARNING
    labels = percentiles is not None and percentiles[0] >= 0 and percentiles[-1] <= 1
    return _found(run, severity, "the output activation cannot reach the targets",
                  f"{where}, makes {out['units']} values that sum to 1 for every sample; ~{off_one:.0%} of the "
                  "training target rows do not sum to 1" + (" (several labels on at once, or none)" if labels else "")
                  + ": their error is a floor under the loss.",
                  "independent labels take one sigmoid each (output_activation=sigmoid, or logits under "
                  "loss.function=bce); other targets no activation (output_activation=identity).",
                  "sigmoid" if labels else "identity")


def _not_logits(run: RunData, out: dict, where: str) -> Finding | None:
    """A cross-entropy on logits that reads a squashed output: bounded logits put a floor under it."""
    low, high = _range(out)
    if not (math.isfinite(low) and math.isfinite(high)):
        return None  # one side open: the logits' differences are unbounded
    if run.summary.get("loss_function") == "bce":  # one sigmoid per label: each probability is bounded
        return _found(run, Severity.WARNING, "the loss reads squashed logits",
                      f"{where}, bounds the logits BCE-with-logits reads to [{low:.4g}, {high:.4g}]: each label's "
                      f"probability stays between {_sigmoid(low):.3g} and {_sigmoid(high):.3g}, so no label can be "
                      "predicted confidently on or off, the loss cannot fall far and its gradients stay small.",
                      "BCE-with-logits takes raw logits and applies one sigmoid per label itself: drop the output "
                      "activation (output_activation=identity).", "identity")
    return _found(run, Severity.WARNING, "the loss reads squashed logits",
                   f"{where}, bounds the logits the cross-entropy reads to [{low:.4g}, {high:.4g}]: no class "
                   f"can be more than e^{high - low:.3g} times "
                   "likelier than another, so the loss cannot fall far and its gradients stay small.",
                   "the classification loss takes raw logits and applies the softmax itself: drop the output "
                   "activation (output_activation=identity).", "identity")


def _not_a_probability(run: RunData, out: dict, where: str) -> Finding | None:
    """A model that turns its output activation into class probabilities itself (one unit for a binary
    task, or one per class) needs a probability there: a ReLU can be 0 for every class (0/0) or over 1."""
    binary = out["units"] == 1 and out["output_units"] == 2 and run.summary.get("task") == "classification"
    if not (binary or out["units"] == out["output_units"]):
        return None  # not the class scores: something the model computes on
    low, high = _range(out)
    if 0 <= low and high <= 1:
        return None
    independent = run.summary.get("loss_function") == "bce"  # one probability per target, not one over classes
    target = "sigmoid" if binary or independent else "softmax"
    return _found(run, Severity.WARNING, "the class scores are not probabilities",
                   f"{where}, outputs values in [{low:.4g}, {high:.4g}] that the model then "
                   "turns into the logits the loss reads: scores of 0, or over 1, are no probability (clipped, "
                   "they pass no gradient; all 0, they normalise to NaN).",
                   f"a probability of one class is a sigmoid, of one of several classes a softmax "
                   f"(output_activation={target} replaces it).", target)


def _found(run: RunData, severity: Severity, title: str, evidence: str, fix: str, target: str) -> Finding:
    """The finding, with the output activation that can express the answer as its remedy, and the
    user's line that made the output, where the traced first step saw it."""
    module = (run.summary.get("output_activation") or {}).get("module")
    evidence += in_your_code(*run.summary.get("output_lines") or (), *built_lines(run, module))
    return Finding("output_activation", severity, title, evidence, fix, output_fix(run, target))


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _range(out: dict) -> tuple[float, float]:
    """The activation's range, an open end as an infinity."""
    return (-math.inf if out["low"] is None else out["low"]), (math.inf if out["high"] is None else out["high"])
