"""Where the LR range test points, found so that noise and stray batches cannot move it far.

The rule, in log10(LR):
1. A running median over MEDIAN_POINTS losses drops single-batch outliers (one odd batch, a
   transient spike), which would otherwise drag every average around them.
2. A centred window then smooths the curve: a least-squares line through the `window` fraction
   of the points around each one (at least MIN_WINDOW), giving the smoothed loss and its slope.
   A centred window has no lag; the EMA the stop rule reads trails the raw losses by
   beta/(1-beta) updates, which shifts every feature of its curve towards higher LRs.
3. The minimum of the smoothed curve ends the search: beyond it a larger LR no longer helps.
4. Before that minimum, and at least half a window in from the start (where the window is cut
   short and the slope is noisy), the steepest descent is where the local line falls fastest.
   Each slope averages a whole window: the two-point gradients other finders take are ruled
   by the noise of single batches.
5. The suggestion lies halfway, in log(LR), between the steepest descent and the minimum.
   The steepest point is where a sweep that spends a few updates per LR learns fastest; a run
   that stays at one LR for thousands of updates profits from more, up to a margin below the
   minimum, where the loss stops improving and stability ends. Halfway keeps a factor
   sqrt(minimum / steepest) (typically 2-5x) below that edge.
Caveats, named in the result's `note`: with no descent before the minimum (the loss only rose,
or bottomed out in the first half-window) the suggestion is the minimum's LR / NO_DESCENT_MARGIN;
a descent smaller than MIN_DESCENT_NOISE times the losses' scatter around the curve is noise,
not learning, so the suggestion is kept but called unreliable.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

MEDIAN_POINTS = 5  # removes isolated outliers up to two points wide; wider than that is a real feature
MIN_WINDOW = 5  # fewer points make a line fit as noisy as the raw losses
NO_DESCENT_MARGIN = 10.0  # an order of magnitude below the minimum: the classic rule of thumb
MIN_DESCENT_NOISE = 3.0  # a fall of 3 standard deviations of the scatter is unlikely to be chance
MAD_TO_STD = 1.4826  # median absolute deviation -> standard deviation, for Gaussian noise

RULE = ("running median (5 points), then centred least-squares lines over `window` of the points in log10(lr); "
        "suggestion = geometric mean of the LR of steepest descent before the minimum and the LR of the minimum "
        "(no descent: minimum LR / 10)")


@dataclass
class Suggestion:
    lr: float
    steepest_lr: float | None
    minimum_lr: float
    curve: list[float] = field(repr=False)  # smoothed losses
    slopes: list[float] = field(repr=False)  # d loss / d log10(lr) of the local lines
    note: str = ""


def running_median(y: np.ndarray, points: int = MEDIAN_POINTS) -> np.ndarray:
    half = points // 2
    padded = np.pad(y, half, mode="edge")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, points), axis=1)


def robust_scatter(residuals: np.ndarray) -> float:
    """Standard deviation estimated from the median absolute deviation: stray batches do not inflate it."""
    return float(MAD_TO_STD * np.median(np.abs(residuals - np.median(residuals))))


def local_lines(x: np.ndarray, y: np.ndarray, half: int) -> tuple[np.ndarray, np.ndarray]:
    """Value and slope at each x of the least-squares line through its neighbours within ±half points."""
    values, slopes = np.empty_like(y), np.empty_like(y)
    for i in range(len(x)):
        lo, hi = max(0, i - half), min(len(x), i + half + 1)
        slopes[i], values[i] = np.polyfit(x[lo:hi] - x[i], y[lo:hi], 1)
    return values, slopes


def window_half_width(num_points: int, window: float) -> int:
    return max(MIN_WINDOW, round(window * num_points)) // 2


def suggest_lr(lrs: list[float], losses: list[float], window: float) -> Suggestion:
    """The suggested LR for a sweep's (lr, loss) points (at least 2), by the rule in this module's docstring."""
    x, y = np.log10(np.asarray(lrs, dtype=float)), np.asarray(losses, dtype=float)
    half = window_half_width(len(x), window)
    curve, slopes = local_lines(x, running_median(y), half)
    minimum = int(np.argmin(curve))
    minimum_lr = float(lrs[minimum])
    if minimum <= half:
        return Suggestion(minimum_lr / NO_DESCENT_MARGIN, None, minimum_lr, curve.tolist(), slopes.tolist(),
                          note="no descent before the loss minimum: lower lr_find.min_lr, or the model is not learning")
    steepest = half + int(np.argmin(slopes[half:minimum]))
    steepest_lr = float(lrs[steepest])
    descent, scatter = curve[half] - curve[minimum], robust_scatter(y - curve)
    note = "" if descent > MIN_DESCENT_NOISE * scatter else (
        f"unreliable: the loss fell by {descent:.3g}, within its scatter (±{scatter:.2g}); "
        "raise lr_find.num_steps or the batch size, or check the model learns with mode=doctor")
    return Suggestion(math.sqrt(steepest_lr * minimum_lr), steepest_lr, minimum_lr, curve.tolist(), slopes.tolist(),
                      note)
