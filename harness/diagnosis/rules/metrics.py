"""A measured metric (accuracy, F1, AUROC: the built-in ones and `metrics.NAME`) that never moved
from the untrained model's value while the loss did: what the metric reads of the output (a
threshold, an argmax) never changed, so the loss's progress never reached a prediction. Seen on a
multi-label tagger whose sigmoid output was fed to BCE-with-logits: its label accuracy sat at the
untrained value at all six evals while the loss fell."""
from __future__ import annotations

import math

import numpy as np

from harness.core.metric_names import (VAL_EFFECTIVE_RANK, VAL_LOSS, VAL_LOSS_ON_TRAIN, VAL_LOSS_PART, VAL_PERPLEXITY,
                                       VAL_PREFIX, flat)
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.outcome import BETTER_BY, NOISE_SIGMAS
from harness.diagnosis.signals import MIN_EVALS, Series, fmt, noise_level

NOT_PREDICTIONS = (VAL_LOSS, VAL_LOSS_ON_TRAIN, VAL_PERPLEXITY, VAL_EFFECTIVE_RANK)  # the loss and what follows it


def frozen_metric(run: RunData) -> Finding | None:
    loss = run.series(VAL_LOSS, kind="eval").finite()
    start_loss = run.summary.get("initial_" + flat(VAL_LOSS))
    if len(loss) < MIN_EVALS or start_loss is None or not _moved(loss, float(start_loss)):
        return None
    names = dict.fromkeys(k for row in run.evals for k in row if k.startswith(VAL_PREFIX)
                          and k not in NOT_PREDICTIONS and not k.startswith(VAL_LOSS_PART))
    for name in names:
        values = run.series(name, kind="eval").values
        start = run.summary.get("initial_" + flat(name))
        if len(values) < MIN_EVALS or start is None or start == 1.0 or not np.all(values == start):
            continue
        return Finding(
            "frozen_metric", Severity.WARNING, f"`{name}` never moved from the untrained model's value",
            f"`{name}` was {fmt(float(start))} untrained and exactly that at each of {len(values)} evals, while "
            f"the val loss went from {fmt(float(start_loss))} to {fmt(float(loss.values[-1]))} (best "
            f"{fmt(float(loss.values.min()))}): the prediction the metric reads (a threshold, an argmax) never "
            "changed, so what the loss learned never reached it.",
            "check what the loss and the metric read of the output: an output squashed twice (a sigmoid or softmax "
            "fed to a loss that applies its own) keeps every prediction on one side of the threshold; a constant "
            "output, or a metric computed on the wrong tensor, does the same. report.md quotes a cause in your code "
            "where the traced first step found one.")
    return None


def _moved(loss: Series, start: float) -> bool:
    """The val loss left its untrained value by more than 1% and twice its eval-to-eval noise."""
    values = np.concatenate([[start], loss.values])
    if (values <= 0).any():
        spread = float(values.max() - values.min())
        return spread > max(BETTER_BY * abs(start), NOISE_SIGMAS * noise_level(loss))
    logs = np.log(values)
    return float(logs.max() - logs.min()) > max(-math.log1p(-BETTER_BY), NOISE_SIGMAS * noise_level(
        Series(loss.steps, np.log(loss.values))))
