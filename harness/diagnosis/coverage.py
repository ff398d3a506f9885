"""What the diagnosis could not judge on a run, and what it would need: report.md's "not judged"
rows. A rule that stays silent for want of evidence says so here, so that "No pathology found"
never stands for "not looked at"."""
from __future__ import annotations

from harness.core.metric_names import VAL_LOSS
from harness.diagnosis.load import RunData
from harness.diagnosis.outcome import Outcome, prior_applies
from harness.diagnosis.rules import signed_loss
from harness.diagnosis.signals import MIN_EVALS

NO_PRIOR = ("a plateau at the prior or at chance, and underfitting against the best constant: this objective's best "
            "constant is unknown (an objective that returns a `prior` part, the loss of its best constant "
            "prediction, has them judged)")
SIGNED_LOSS = ("divergence, oscillation, over- and underfitting and slow progress by the loss's level: this "
               "objective's loss reaches 0 or below, where ratios of levels mean nothing (a non-finite loss is "
               "still judged)")
CURVE_RULES = ("the plateaus, over- and underfitting, slow progress, the capacity limit, the eval/train-mode gap, "
               "posterior and representation collapse, and whether the run ended worse than its best")


def not_judged(run: RunData, ended: Outcome | None) -> list[str]:
    """One line per thing the rules could not judge on this run (`ended`: its outcome), each with
    what it needs."""
    s, lines = run.summary, []
    evals = len(run.series(VAL_LOSS, kind="eval").finite())
    if evals < MIN_EVALS:
        every = run.cfg("trainer.eval_every")
        lines.append(f"{CURVE_RULES}: they read at least {MIN_EVALS} evals, and this run has {evals}"
                     + (f" (trainer.eval_every={every} of {run.max_steps} steps)" if every and run.max_steps else ""))
    if ended is None:
        lines.append("the outcome (did the run learn, did it end near its best): it needs the untrained model's eval, "
                     "which runs started before it was measured do not have")
    if not prior_applies(run):
        lines.append(NO_PRIOR)
    if signed_loss(run):
        lines.append(SIGNED_LOSS)
    return lines
