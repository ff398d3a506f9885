"""Small, robust summaries of a logged curve that several rules share.

Logged train losses are already means over `trainer.log_every` updates; medians of a few
points on top of that keep one noisy window from deciding a finding.
"""
from __future__ import annotations

import numpy as np

from harness.diagnosis.load import Series

EDGE_POINTS = 3  # points whose median stands for "the start" / "the end" of a curve
MIN_EVALS = 3  # the fewest evals a rule reads a val curve from (report.md says which rules were not judged)


def start_level(series: Series) -> float:
    """Median of the first few finite values (NaN when there are none)."""
    values = series.finite().values
    return float(np.median(values[:EDGE_POINTS])) if len(values) else float("nan")


def end_level(series: Series) -> float:
    values = series.finite().values
    return float(np.median(values[-EDGE_POINTS:])) if len(values) else float("nan")


def level_at(series: Series, step: int) -> float:
    """Median of the EDGE_POINTS values logged nearest to `step`."""
    nearest = np.argsort(np.abs(series.steps - step), kind="stable")[:EDGE_POINTS]
    return float(np.median(series.values[nearest]))


def rolling_median(series: Series, width: int = 3) -> Series:
    """Centred running median of the finite points: one noisy log window cannot make a bump,
    a climb that lasts two windows or more survives."""
    finite = series.finite()
    half = width // 2
    values = np.array([np.median(finite.values[max(0, i - half): i + half + 1]) for i in range(len(finite))])
    return Series(finite.steps, values)


def noise_level(series: Series) -> float:
    """Robust std of the point-to-point noise: MAD of the first differences / sqrt(2). A trend or a
    few large jumps barely move it; white batch noise sets it."""
    diffs = np.diff(series.finite().values)
    if not len(diffs):
        return 0.0
    return float(1.4826 * np.median(np.abs(diffs - np.median(diffs))) / np.sqrt(2))


def excursions(series: Series, rel_rise: float, abs_rise: float) -> list[tuple[int, float, float]]:
    """Stretches where the curve climbs above its running minimum by more than
    max(rel_rise * min, abs_rise); one (peak step, peak value, running min) per stretch."""
    found: list[tuple[int, float, float]] = []
    running_min, inside = float("inf"), False
    for step, value in zip(series.steps, series.values):
        if not np.isfinite(value):
            continue
        high = value - running_min > max(rel_rise * abs(running_min), abs_rise)
        if high and not inside:
            found.append((int(step), float(value), running_min))
        elif high and value > found[-1][1]:
            found[-1] = (int(step), float(value), running_min)
        inside = high
        running_min = min(running_min, value)
    return found


def still_falling(val: Series, tail: float, by: float) -> bool:
    """Whether the val loss improved by >= `by` (relative) over the last `tail` share of the run."""
    tail_start = val.steps[0] + (1 - tail) * (val.steps[-1] - val.steps[0])
    before_tail = float(val.values[val.steps <= tail_start][-1])
    return before_tail - float(val.values[-1]) >= by * abs(before_tail)


def fmt(value: float) -> str:
    """Numbers in evidence text: 3 significant digits, NaN/Inf spelled as such."""
    return f"{value:.3g}" if np.isfinite(value) else str(value)
