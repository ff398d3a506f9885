"""Facts about a run that more than one rule module asks for."""
from __future__ import annotations

import numpy as np

from harness.diagnosis.load import RunData
from harness.diagnosis.signals import end_level, start_level
from harness.core.metric_names import GRAD_NORM, TRAIN_LOSS, TRAIN_LR, UPDATE_RATIO, VAL_LOSS

LATE_FRACTION = 2 / 3  # "the last third of the run"
MIN_ROWS = 5  # logged train rows a rule wants before judging a trend
# A solved task: the train loss ended at 1/1000 of where it started. Every gradient has shrunk
# with the loss, to where rounding sets it: the first layers' (products of more small factors)
# underflow to 0, one sample's tiny error is a 1000x "burst", and the units the solution does
# not need sit at 0. Gradient rules read a run that is not learning, which this one has done.
SOLVED_FRACTION = 1e-3


# A run learned clearly when its val loss ended (median of its last evals) at or below 80% of what
# a model blind to its inputs gets on those samples (the val split's prior; the training split's,
# or chance, without it): a setup flaw beside that (unscaled inputs, some dead units) cost it less
# than what it learned, so it is said as info. Raised again beside a symptom (rules.CAUSES).
LEARNED_SHARE = 0.8
LEARNED_EVALS = 3


def blind_loss(run: RunData) -> float | None:
    """What a model blind to its inputs gets on the eval samples: the val prior; the training prior
    or chance ln K without it."""
    return run.summary.get("val_prior_loss") or run.summary.get("prior_loss") or run.summary.get("chance_loss")


def learned_clearly(run: RunData) -> bool:
    val = run.series(VAL_LOSS, kind="eval").finite()
    prior = blind_loss(run)
    if not prior or prior <= 0 or len(val) < LEARNED_EVALS:
        return False
    return end_level(val) <= LEARNED_SHARE * prior


def solved(run: RunData) -> bool:
    loss = run.series(TRAIN_LOSS).finite()
    return len(loss) >= MIN_ROWS and 0 < start_level(loss) and end_level(loss) <= SOLVED_FRACTION * start_level(loss)


def fp16_unscaled(run: RunData) -> bool:
    """fp16 autocast without a GradScaler: gradients below ~6e-8 round to exactly 0."""
    return run.cfg("precision.name") == "fp16" and run.cfg("precision.loss_scaling", True) is False


def zero_gradient_tensors(run: RunData) -> list[str]:
    """Weight tensors whose gradient norm was exactly 0 on every logged step of the run's last third.
    In float32 a used weight practically never gets an exactly-zero gradient: something cut it off."""
    frozen = []
    for key in run.keys(GRAD_NORM):
        if key.endswith("weight"):
            late = run.series(key).after_fraction(LATE_FRACTION).values
            if len(late) and not late.any():
                frozen.append(key.split("/", 1)[1])
    return frozen


def name_some(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def peak_lr_update_ratio(run: RunData) -> float | None:
    """Median update/weight norm ratio of the weight tensors over the logged steps where the LR was
    at least half its peak (warmup and the decayed tail say nothing about whether the LR is too
    low); None without per-layer monitors."""
    lr = run.series(TRAIN_LR).finite()
    keys = [k for k in run.keys(UPDATE_RATIO) if k.endswith("weight")]
    if not len(lr) or not keys:
        return None
    at_peak = set(lr.steps[lr.values >= 0.5 * lr.values.max()].tolist())
    medians = []
    for key in keys:
        ratios = run.series(key).finite()
        values = ratios.values[np.isin(ratios.steps, list(at_peak))]
        if len(values):
            medians.append(float(np.median(values)))
    return float(np.median(medians)) if medians else None
