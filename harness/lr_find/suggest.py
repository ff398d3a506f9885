"""Where the LR range test points: the steepest descent of the loss, found so that noise cannot move it far.

The rule, in log10(LR):
1. Smooth the raw losses with a centred window (a least-squares line through the `window`
   fraction of the points around each one, at least MIN_WINDOW points). A centred window has
   no lag; the EMA the stop rule reads trails the raw losses by beta/(1-beta) updates, which
   shifts every feature of its curve towards higher LRs.
2. The minimum of the smoothed curve ends the search: beyond it the LR is too high to help.
3. Before that minimum, and at least half a window in from the first point (where the window is
   cut short and the slope is noisy), take the point where the local line falls fastest: the
   steepest descent. Each slope averages a whole window, so one noisy batch cannot move it;
   this is what the two-point gradients of other finders lack.
4. Suggest the lower of that LR and the minimum's LR / MIN_MARGIN: training runs for thousands
   of updates at one LR, where the sweep spent a handful, so the edge of stability must stay
   well above the LR chosen.
Fallbacks, each named in the result's `note`: no descent before the minimum (the loss only
rose, or the minimum sits in the first half-window) → the minimum's LR / MIN_MARGIN.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MIN_WINDOW = 5  # fewer points make a line fit as noisy as the raw losses
MIN_MARGIN = 10.0  # an order of magnitude below the loss minimum, the classic rule of thumb

RULE = ("min(steepest descent of a centred least-squares smoothing of loss vs log10(lr) before its minimum, "
        f"lr at the minimum / {MIN_MARGIN:g})")


@dataclass
class Suggestion:
    lr: float
    steepest_lr: float | None
    minimum_lr: float
    curve: list[float] = field(repr=False)  # smoothed losses
    slopes: list[float] = field(repr=False)  # d loss / d log10(lr) of the local lines
    note: str = ""


def local_lines(x: np.ndarray, y: np.ndarray, half: int) -> tuple[np.ndarray, np.ndarray]:
    """Value and slope at each x of the least-squares line through its neighbours within ±half points."""
    values, slopes = np.empty_like(y), np.empty_like(y)
    for i in range(len(x)):
        lo, hi = max(0, i - half), min(len(x), i + half + 1)
        dx = x[lo:hi] - x[i]
        slope, value = np.polyfit(dx, y[lo:hi], 1) if hi - lo > 1 else (0.0, y[i])
        values[i], slopes[i] = value, slope
    return values, slopes


def window_half_width(num_points: int, window: float) -> int:
    return max(MIN_WINDOW, round(window * num_points)) // 2


def suggest_lr(lrs: list[float], losses: list[float], window: float) -> Suggestion:
    """The suggested LR for a sweep's (lr, loss) points, by the rule in this module's docstring."""
    x, y = np.log10(np.asarray(lrs, dtype=float)), np.asarray(losses, dtype=float)
    half = window_half_width(len(x), window)
    curve, slopes = local_lines(x, y, half)
    minimum = int(np.argmin(curve))
    minimum_lr = float(lrs[minimum])
    fallback = minimum_lr / MIN_MARGIN
    if minimum <= half:
        return Suggestion(fallback, None, minimum_lr, curve.tolist(), slopes.tolist(),
                          note="no descent before the loss minimum: lower lr_find.min_lr, or the model is not learning")
    steepest = half + int(np.argmin(slopes[half:minimum]))
    steepest_lr = float(lrs[steepest])
    note = "" if slopes[steepest] < 0 else "the smoothed loss never fell: check the model learns (mode=doctor)"
    return Suggestion(min(steepest_lr, fallback), steepest_lr, minimum_lr, curve.tolist(), slopes.tolist(), note)
