"""The loss jumps at the start of every epoch: the training samples come in a fixed order
(a dataset stored sorted by label, time or source, read without shuffling), so the model
tracks the end of each epoch and meets its start again as new data."""
from __future__ import annotations

import math

import numpy as np

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.signals import fmt

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
    unshuffled = run.cfg("data.shuffle") is False
    order = ("data.shuffle=false reads the training samples in their stored order" if unshuffled
             else "the samples still come in an order that repeats every epoch")
    fix = "set data.shuffle=true" if unshuffled else \
        "check a custom sampler, collate_fn or dataset whose content depends on the epoch"
    return Finding("epoch_boundary_jumps", Severity.WARNING, "the loss jumps at the start of every epoch",
                   f"the loss climbs {fmt(math.exp(median_jump))}x (median) around an epoch's first update, at "
                   f"{int(np.sum(at_start >= JUMP))} of {len(starts)} epoch starts ({shown}); other windows change "
                   f"by {fmt(math.exp(typical))}x. {order}: the model fits the end of each epoch and meets its "
                   "start as new data.",
                   f"{fix}; a dataset stored sorted (by label, time or source) must be shuffled for SGD.")


def _epoch_rows(run: RunData) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(step, train loss, epoch of the window's last update) of every row with a finite loss, and
    the indices of the rows whose window holds an epoch's first update."""
    rows = [r for r in run.train if "train/epoch" in r and _finite(r.get("train/loss"))]
    epochs = np.array([math.ceil(r["train/epoch"]) - 1 for r in rows], dtype=np.int64)
    return (np.array([r["step"] for r in rows], dtype=np.int64),
            np.array([float(r["train/loss"]) for r in rows], dtype=np.float64),
            epochs, np.flatnonzero(np.diff(epochs) > 0) + 1)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)
