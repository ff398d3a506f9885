"""The loss jumps at the start of every epoch: the training samples come in a fixed order
(a dataset stored sorted by label, time or source, read without shuffling), so the model
tracks the end of each epoch and meets its start again as new data."""
from __future__ import annotations

import math

import numpy as np

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.signals import fmt
from harness.core.metric_names import TRAIN_EPOCH, TRAIN_LOSS

# A jump is the log-ratio of consecutive logged losses, taken at an epoch start: the larger of the
# climb into the window holding the epoch's first update and the climb into the window before it
# (early on, the loss already rises through each epoch's last window, as the model lags the
# sorted samples; later it spikes at the first window of the new epoch). A jump of >= 50% must
# show at >= 3 epoch starts and >= 2/3 of those seen, and the median jump must beat the 90th
# percentile of the other windows' log-ratios: a shuffled run's epoch starts are draws from the
# same distribution as any other window (measured: median jump +10%, others' 90th percentile
# +28%); a sorted, unshuffled dataset's measure x6.0 against x2.6.
MIN_BOUNDARIES = 3
JUMP = math.log(1.5)
JUMP_SHARE = 2 / 3
OTHERS_PERCENTILE = 90
# Epoch starts must be rare among windows (<= 1 in 4), or every other window sits next to one and
# the comparison with "other windows" means nothing (epochs about as short as the log interval).
MAX_BOUNDARY_SHARE = 1 / 4
# Or the loss follows the window's place in the epoch: data sorted by a continuous target falls
# and climbs through every epoch (measured: the places explain 70% of the detrended log loss,
# adjusted, and their means span 34x); the suite's other runs long enough to judge (>= 4 epochs)
# span <= 1.12x, and a short run's chance fit of many places is what the adjustment removes.
PHASE_R2 = 0.4
PHASE_SPAN = 2.0


def boundary_steps(run: RunData) -> set[int]:
    """Steps of the logged rows next to an epoch start (the window holding it and the one before),
    when epoch starts are rare enough to judge; other rules leave these rows to this one."""
    steps, _, _, starts = _epoch_rows(run)
    if len(starts) > MAX_BOUNDARY_SHARE * len(steps):
        return set()
    return {int(steps[i]) for i in np.concatenate([starts, starts - 1]) if i >= 0}


def epoch_boundary_jumps(run: RunData) -> Finding | None:
    steps, values, _, starts = _epoch_rows(run)
    if len(starts) < MIN_BOUNDARIES or len(starts) > MAX_BOUNDARY_SHARE * len(steps):
        return None
    return _jumps(run, steps, values, starts) or _phase_locked(run, values, starts)


def _jumps(run: RunData, steps: np.ndarray, values: np.ndarray, starts: np.ndarray) -> Finding | None:
    """A climb at each epoch start, well above how other windows change."""
    climbs = np.diff(np.log(np.maximum(values, 1e-12)))  # climbs[i - 1]: from row i - 1 to row i
    before = np.maximum(starts - 2, 0)
    at_start = np.maximum(climbs[starts - 1], np.where(starts >= 2, climbs[before], -np.inf))
    others = np.delete(climbs, np.concatenate([starts - 1, before[starts >= 2]]))
    if not len(others):
        return None
    typical, high = float(np.median(others)), float(np.percentile(others, OTHERS_PERCENTILE))
    median_jump = float(np.median(at_start))
    if np.mean(at_start >= JUMP) < JUMP_SHARE or median_jump < max(JUMP, high):
        return None
    peaks = np.where(climbs[starts - 1] >= at_start, starts, starts - 1)  # the row each jump climbed into
    shown = ", ".join(f"step {int(steps[j])}: {fmt(float(values[j - 1]))} -> {fmt(float(values[j]))}"
                      for j in peaks[:4])
    return _finding(run, "the loss jumps at the start of every epoch",
                    f"the loss climbs {fmt(math.exp(median_jump))}x (median) around an epoch's first update, at "
                    f"{int(np.sum(at_start >= JUMP))} of {len(starts)} epoch starts ({shown}); other windows change "
                    f"by {fmt(math.exp(typical))}x")


def _phase_locked(run: RunData, values: np.ndarray, starts: np.ndarray) -> Finding | None:
    """The loss follows the position within the epoch, whatever the shape: data sorted by a
    continuous target makes it fall and climb again through every epoch, the climb spread over
    several windows rather than a jump at the start. The log loss minus its moving mean over one
    epoch (which removes the trend and keeps anything periodic with the epoch) is grouped by the
    window's place in its epoch: the places must explain >= PHASE_R2 of its variance (adjusted
    for the number of places) and their means must span >= PHASE_SPAN."""
    period = int(np.median(np.diff(starts)))
    if len(values) < (MIN_BOUNDARIES + 1) * period:
        return None
    logs = np.log(np.maximum(values, 1e-12))
    trend = np.convolve(logs, np.ones(period) / period, mode="valid")  # trend[j]: mean of logs[j : j + period]
    first = period // 2
    residual = logs[first:first + len(trend)] - trend
    place = (np.arange(len(values)) - starts[0])[first:first + len(trend)] % period
    means = np.array([residual[place == p].mean() for p in range(period)])
    total = float(np.sum((residual - residual.mean()) ** 2))
    within = float(np.sum((residual - means[place]) ** 2))
    n = len(residual)
    explained = 1 - (within / max(n - period, 1)) / max(total / (n - 1), 1e-12)
    span = math.exp(float(means.max() - means.min()))
    if explained < PHASE_R2 or span < PHASE_SPAN:
        return None
    low, high = int(np.argmin(means)), int(np.argmax(means))
    return _finding(run, "the loss rises and falls with the position in every epoch",
                    f"the loss, net of its trend, follows the window's place in the epoch: the places explain "
                    f"{explained:.0%} of its variation, from {fmt(math.exp(float(means[low])))}x the trend at "
                    f"window {low + 1} of {period} to {fmt(math.exp(float(means[high])))}x at window {high + 1}")


def _finding(run: RunData, title: str, evidence: str) -> Finding:
    unshuffled = run.cfg("data.shuffle") is False
    order = ("data.shuffle=false reads the training samples in their stored order" if unshuffled
             else "the samples still come in an order that repeats every epoch")
    fix = "set data.shuffle=true" if unshuffled else \
        "check a custom sampler, collate_fn or dataset whose content depends on the epoch"
    return Finding("epoch_boundary_jumps", Severity.WARNING, title,
                   f"{evidence}. {order}: the model fits the end of each epoch and meets its start as new data.",
                   f"{fix}; a dataset stored sorted (by label, time, source or target value) must be shuffled for SGD.")


def _epoch_rows(run: RunData) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(step, train loss, epoch of the window's last update) of every row with a finite loss, and
    the indices of the rows whose window holds an epoch's first update."""
    rows = [r for r in run.train if TRAIN_EPOCH in r and _finite(r.get(TRAIN_LOSS))]
    epochs = np.array([math.ceil(r[TRAIN_EPOCH]) - 1 for r in rows], dtype=np.int64)
    return (np.array([r["step"] for r in rows], dtype=np.int64),
            np.array([float(r[TRAIN_LOSS]) for r in rows], dtype=np.float64),
            epochs, np.flatnonzero(np.diff(epochs) > 0) + 1)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
