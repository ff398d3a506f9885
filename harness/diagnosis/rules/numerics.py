"""Rules about the numbers themselves: a forward pass that overflows, fp16 overflow skips with a
loss scaler, underflow to zero without one."""
from __future__ import annotations

import math

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.remedies import bounded_forward, wider_range
from harness.diagnosis.rules.code import quoted_line
from harness.diagnosis.rules.common import fp16_unscaled, name_some, zero_gradient_tensors
from harness.diagnosis.signals import fmt
from harness.core.metric_names import TRAIN_LOSS_SCALE

# GradScaler halves the scale on every overflow: from init_scale it takes log2(init_scale)
# overflows to reach 1 while it calibrates, and each attempt to grow (every growth_interval
# clean steps) may cost one more. Skips beyond that budget, plus this slack, are real overflows.
OVERFLOW_SLACK = 4


def forward_overflow(run: RunData) -> Finding | None:
    """A module of the untrained model returned Inf/NaN on finite inputs (summary.json's `forward`,
    measured before any update): the forward's own numbers, not the LR or the data, make the loss
    non-finite."""
    forward = run.summary.get("forward") or {}
    where = forward.get("nonfinite")
    if not where:
        return None
    if where["module"] == "":
        return _own_code_nonfinite(where, quoted_line(run, "nonfinite_op"))
    hidden = where["module"] in (run.summary.get("hidden_activations") or ())
    largest = f" (its largest input {fmt(where['input_max'])})" if where.get("input_max") is not None else ""
    return Finding("forward_overflow", Severity.CRITICAL, "the forward pass overflows",
                   f"before any update, `{where['module']}` ({where['type']}) returned Inf/NaN on finite inputs"
                   f"{largest}, so the loss is not finite whatever the LR; every layer after it, and the gradient, "
                   f"inherit it.{quoted_line(run, 'nonfinite_op')}",
                   "bound the activation (a GELU, tanh or softplus grows slowly; an exponential overflows float32 past "
                   "about 88), keep its inputs small (standardise the data, a smaller init), or compute it in a "
                   "stable form (log-sum-exp, torch.special); a lower LR cannot shrink an input.",
                   bounded_forward(run, hidden))


def _own_code_nonfinite(where: dict, line: str) -> Finding:
    """The model's output went non-finite on finite inputs while every module it called returned
    finite values: a step of the forward written as a function did it. No config change reaches
    that code, and no update has happened yet, so no remedy is offered."""
    after = f" (the last, `{where['after']}` ({where['after_type']}))" if where.get("after") else ""
    return Finding("forward_overflow", Severity.CRITICAL, "the forward pass is not finite",
                   f"before any update, the model's output is Inf/NaN on finite inputs while every module it called "
                   f"returned finite values{after}: the forward's own code after them makes it (a log or square root "
                   "of a value at or below 0, a division by 0, an exponential past about 88, written as a function), "
                   f"so the loss is not finite whatever the LR; no update has happened yet.{line}",
                   "compute that step in a stable form (log_softmax, logsigmoid or a clamp before a log; a loss on "
                   "logits such as binary_cross_entropy_with_logits), or bound what it reads (a sigmoid before a "
                   "log of a probability).")


def fp16_overflow_skips(run: RunData) -> Finding | None:
    if run.cfg("precision.name") != "fp16" or not run.cfg("precision.loss_scaling", True):
        return None
    overflows = int(run.summary.get("overflow_steps") or 0)
    steps = int(run.summary.get("steps") or (run.train[-1]["step"] if run.train else 0))
    init_scale = float(run.cfg("precision.init_scale", 2.0**16))
    growth_interval = int(run.cfg("precision.growth_interval", 2000))
    budget = max(math.log2(init_scale), 0) + steps // growth_interval + OVERFLOW_SLACK
    if overflows <= budget:
        return None
    scale = run.series(TRAIN_LOSS_SCALE).finite()
    scale_text = (f"; the loss scale went {fmt(float(scale.values[0]))} -> min {fmt(float(scale.values.min()))}"
                  if len(scale) else "")
    return Finding("fp16_overflow_skips", Severity.WARNING, "fp16 overflows keep skipping updates",
                   f"{overflows} of {steps} updates skipped for Inf/NaN gradients (calibrating the scale from "
                   f"{fmt(init_scale)} accounts for about {int(budget)}){scale_text}.",
                   "activations or gradients exceed fp16's range (65504): use precision=bf16; or remove the spike "
                   "(lower optim.lr, clip=1.0, loss.z_loss=1e-4 for growing logits).", wider_range(run, scaling_is_on=True))


def fp16_underflow(run: RunData) -> Finding | None:
    if not fp16_unscaled(run):
        return None
    zeros = zero_gradient_tensors(run)
    if not zeros:
        return None
    return Finding("fp16_underflow", Severity.CRITICAL, "fp16 gradients underflow to zero (no loss scaling)",
                   f"precision=fp16 with precision.loss_scaling=false; {len(zeros)} weight tensor(s) got exactly "
                   f"zero gradient on every logged step of the last third of the run: {name_some(zeros)}.",
                   "precision.loss_scaling=true (GradScaler multiplies the loss so small gradients stay "
                   "representable), or precision=bf16 (fp32's range).", wider_range(run, scaling_is_on=False))
