"""Rule about a model too narrow for its classes: it cannot represent the task, whatever the LR or the labels."""
from __future__ import annotations

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.curves import MIN_EVALS, PLATEAU_IMPROVEMENT, PLATEAU_TAIL
from harness.diagnosis.signals import fmt, still_falling
from harness.core.metric_names import VAL_LOSS

# The classifier's logits over the eval samples (`output_directions` in summary.json) span at most
# a quarter of their K-1 directions (a direction counts at >= 10% of the largest singular value).
# In the pathology suite, working classifiers span 6-10 of 10 and 16 of 20 (shuffled labels too:
# 4 of 4, 9-10 of 10); a 2-unit bottleneck before 20 classes spans 3, a hidden width of 2 spans 2.
MAX_DIRECTION_SHARE = 0.25
MIN_CLASSES = 4  # with 2 or 3 classes one or two directions are all there is
# ... and the run settled (val < 5% better over the last 30%) with its best val loss above a tenth
# of where a blind model sits (the prior, else ln K): capped, not merely low-dimensional.
SETTLED_ABOVE = 0.10


def capacity_limit(run: RunData) -> Finding | None:
    measured = run.summary.get("output_directions")
    val = run.series(VAL_LOSS, kind="eval").finite()
    if not measured or len(val) < MIN_EVALS:
        return None
    directions, classes = measured["directions"], measured["classes"]
    if classes < MIN_CLASSES or directions > MAX_DIRECTION_SHARE * classes:
        return None
    floor = run.summary.get("prior_loss") or run.summary.get("chance_loss")
    best = float(val.values.min())
    if still_falling(val, PLATEAU_TAIL, PLATEAU_IMPROVEMENT) or (floor and best <= SETTLED_ABOVE * floor):
        return None
    spectrum = ", ".join(fmt(v) for v in measured["spectrum"][:directions + 2])
    return Finding("capacity_limit", Severity.WARNING, "the model is too narrow to tell its classes apart",
                   f"its logits span {directions} of {classes - 1} directions over {measured['samples']} eval samples "
                   f"(relative singular values {spectrum}): some layer between input and output is about "
                   f"{directions} wide; the val loss settled at {fmt(best)}"
                   + (f" against {fmt(floor)} for a model blind to its inputs" if floor else "") + ".",
                   f"widen the narrowest layer (a bottleneck, model.width, the hidden size) to at least the "
                   f"{classes} classes, or use a bigger model; neither the labels nor the LR can fix this.")
