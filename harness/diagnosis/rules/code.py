"""Rules that name a cause in the user's own code at its file and line (summary.json's
`code_causes`, from the traced first step: models/code_checks.py). The cause was measured on the
untrained model, so it holds whatever the run's curves show; most need an edit no config override
reaches, and the finding quotes the lines and says the edit. Where a config remedy does reach it
(an output activation that is a module), the finding carries it."""
from __future__ import annotations

from typing import Any

from harness.diagnosis.findings import Finding, Remedy, Restart, Severity
from harness.diagnosis.load import RunData

# the checks whose cause a module-level finding already reports (forward_overflow, output_activation):
# those findings quote the line (`quoted_line`) instead of a second finding
QUOTED_ELSEWHERE = frozenset({"nonfinite_op", "saturated_op"})


def causes(run: RunData) -> list[dict[str, Any]]:
    return list(run.summary.get("code_causes") or ())


def shown(line: dict[str, Any]) -> str:
    return f"`{line['file']}:{line['line']}  {line['text']}`"


def in_your_code(*lines: dict[str, Any]) -> str:
    """' In your code: `FILE:LINE  text`; ...' for each distinct line, '' for none."""
    distinct = list({(line["file"], line["line"]): line for line in lines}.values())
    return f" In your code: {'; '.join(shown(line) for line in distinct)}." if distinct else ""


def built_lines(run: RunData, module: str | None) -> list[dict[str, Any]]:
    """The user's lines that built an activation module the findings name (a module in nn.Sequential
    has no line of its own in the forward)."""
    return list((run.summary.get("module_lines") or {}).get(module or "", ()))


def quoted_line(run: RunData, *checks: str, module: str | None = None) -> str:
    """' In your code: ...' for the lines of the first cause of `checks` the trace found, and those
    that built `module`; '' when there are none."""
    cause = next((c for c in causes(run) if c["check"] in checks), None)
    return in_your_code(*(cause["lines"] if cause else ()), *built_lines(run, module))


# causes that endanger or limit a run without keeping it from training (a log that meets 0 only
# once a probability underflows, layers that compose to one linear map): beside them remedy=auto
# still tries the other findings' remedies (an LR cut postpones the underflow)
LATENT = frozenset({"unguarded_log", "no_nonlinearity"})


def code_lines(run: RunData, latent: bool = True) -> list[str]:
    """FILE:LINE of every code cause the findings name that no override reaches (remedy=auto's
    "needs a code change at"); with `latent` False, only those that stop remedy=auto at once."""
    return [f"{c['lines'][0]['file']}:{c['lines'][0]['line']}" for c in causes(run)
            if c["check"] not in QUOTED_ELSEWHERE and not c["remedy"] and (latent or c["check"] not in LATENT)]


def _finding(run: RunData, check: str) -> Finding | None:
    cause = next((c for c in causes(run) if c["check"] == check), None)
    if cause is None:
        return None
    first = cause["lines"][0]
    lines = "; ".join(shown(line) for line in cause["lines"])
    remedy = tuple(cause["remedy"])
    remedies = (Remedy(remedy, Restart.SCRATCH, "replaces the activation module that makes the cause",
                       kind="output", changes_model=True, any_objective=True),) if remedy else ()
    config = f" (a config override reaches it: `{' '.join(remedy)}`)" if remedy else " (an edit: no config override reaches it)"
    return Finding(check, Severity.WARNING, f"{cause['title']}, at {first['file']}:{first['line']}",
                   f"measured on the untrained model's first batch, before any update: {lines}.",
                   cause["edit"] + config, remedies)


def probabilities_into_logits_loss(run: RunData) -> Finding | None:
    return _finding(run, "probabilities_into_logits_loss")


def relu_into_logits_loss(run: RunData) -> Finding | None:
    return _finding(run, "relu_into_logits_loss")


def softmax_over_one(run: RunData) -> Finding | None:
    """Silent where the model's output is constant with no gradient and no saturated activation
    before it explains that: output_activation names the constant output (with its remedy when the
    softmax is the output's module) and quotes this line. A saturated activation is a cause of its
    own, and its finding quotes only its own line."""
    forward = run.summary.get("forward") or {}
    constant = forward.get("constant_output")
    if constant and not constant.get("saturated") and forward.get("gradient_norm") == 0:
        return None
    return _finding(run, "softmax_over_one")


def broadcast_target(run: RunData) -> Finding | None:
    return _finding(run, "broadcast_target")


def detached_term(run: RunData) -> Finding | None:
    return _finding(run, "detached_term")


def zero_gradient_op(run: RunData) -> Finding | None:
    return _finding(run, "zero_gradient_op")


def unguarded_log(run: RunData) -> Finding | None:
    return _finding(run, "unguarded_log")


def clamped_logits(run: RunData) -> Finding | None:
    return _finding(run, "clamped_logits")


def no_nonlinearity(run: RunData) -> Finding | None:
    return _finding(run, "no_nonlinearity")
