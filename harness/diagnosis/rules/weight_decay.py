"""Rule about weight decay strong enough to shrink the model back towards its untrained output."""
from __future__ import annotations

import math

import numpy as np

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.common import LATE_FRACTION
from harness.diagnosis.signals import EDGE_POINTS, end_level, fmt, start_level
from harness.core.metric_names import GRAD_NORM, PARAM_NORM, TRAIN_LOSS, TRAIN_LR

# At least half of the weight tensors ended below half their start norm (or all of them together did:
# AdamW at wd 50 holds some tensors at an equilibrium just above half while the model, its logits
# shrunk, sits at its prior), and weight decay alone
# accounts for that: with decay factor (1 - lr * wd) per update, the run's logged LRs shrink an
# untouched weight by exp(-sum lr * wd) (the default AdamW, wd 0.1 at lr 1e-3 over 1000 steps:
# 0.90; wd 30: 1e-13). Healthy runs grow their weights or keep them within ~10%. Counted per
# tensor, not as one total: an embedding kept out of decay (optim.no_decay) can hold most of a
# small language model's norm, which then stays put while every decayed tensor goes to zero.
NORM_SHRINK = 0.5
SHRUNK_SHARE = 0.5
DECAY_SHRINK = 0.5
# ... and it cost the run: the train loss ended within 10% of where a model that learned nothing
# sits (ln K, or the prior), or gave back a quarter of its progress from its best.
NEAR_FLOOR = 0.10
GAVE_BACK = 0.25
# Coupled L2 (torch's Adam, RMSprop, Adagrad, NAdam/RAdam unless decoupled: weight_decay adds
# wd * w to the gradient before the adaptive scaling): the step is lr * (g + wd * w) / sqrt(v), so
# once wd * w outweighs the loss gradient every weight moves ~lr towards 0 per update, whatever
# exp(-sum lr * wd) says (Adam at lr 1e-3 and wd 0.5 over 400 steps: 0.82, yet its weights went to
# 0). Decay accounts for the shrink when wd * |w| is at least half the loss gradient's norm on the
# shrunk tensors (median over them, last third): the pull to zero is as strong as the learning.
COUPLED_ADAPTIVE = ("Adam", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam")
COUPLED_PULL = 0.5


def weight_decay_collapse(run: RunData) -> Finding | None:
    wd = run.cfg("optim.weight_decay")
    lr = run.series(TRAIN_LR).finite()
    norms = _weight_norms(run)
    loss = run.series(TRAIN_LOSS).finite()
    if not isinstance(wd, (int, float)) or wd <= 0 or norms is None or len(loss) < 2 * EDGE_POINTS:
        return None
    keys, starts, ends = norms
    below_half = ends < NORM_SHRINK * starts
    together = below_half.mean() < SHRUNK_SHARE and np.linalg.norm(ends) < NORM_SHRINK * np.linalg.norm(starts)
    shrunk = ends < starts if together else below_half  # together below half: every tensor that shrank took part
    steps = np.diff(np.concatenate([[0], lr.steps]))
    decay = math.exp(-float(np.sum(lr.values * steps)) * wd)
    pull = _coupled_pull(run, wd, [k for k, s in zip(keys, shrunk) if s]) if _coupled_adaptive(run) else None
    if shrunk.mean() < SHRUNK_SHARE or (decay >= DECAY_SHRINK and (pull is None or pull < COUPLED_PULL)):
        return None
    start_norm, end_norm = (float(np.sqrt(np.sum(n[shrunk] ** 2))) for n in (starts, ends))
    start, end, best = start_level(loss), end_level(loss), float(loss.values.min())
    floor = min((x for x in (run.summary.get("chance_loss"), run.summary.get("prior_loss")) if x), default=None)
    near_floor = floor is not None and end >= (1 - NEAR_FLOOR) * floor
    gave_back = end - best > GAVE_BACK * max(start - best, 0.0)
    if not (near_floor or gave_back):
        return None
    where = f"within {NEAR_FLOOR:.0%} of {fmt(floor)}, where a model that learned nothing sits" if near_floor else (
        f"up from its best {fmt(best)}")
    if pull is not None and decay >= DECAY_SHRINK:
        why = (f"optim.weight_decay={wd:g} is an L2 term added to the gradient before {_optimizer(run)}'s "
               f"scaling (coupled): its pull wd * |w| is {fmt(pull)}x the loss gradient's norm on those tensors, "
               "so every update moves the weights towards 0 by about the LR")
        coupled = "; or optim=adamw, whose decay is decoupled (0.01-0.1)"
    else:
        why, coupled = f"optim.weight_decay={wd:g} at the run's LRs alone shrinks a weight x{fmt(decay)}", ""
    return Finding("weight_decay_collapse", Severity.CRITICAL, "weight decay shrank the model until it unlearned",
                   f"{int(below_half.sum())} of {len(shrunk)} weight tensors ended below half their start norm, "
                   + (f"and the {int(shrunk.sum())} that shrank " if together else "") +
                   f"together {fmt(start_norm)} -> {fmt(end_norm)} (x{fmt(end_norm / start_norm)}); "
                   f"{why}; the train loss ended at {fmt(end)}, {where}.",
                   f"lower optim.weight_decay (now {wd:g}; AdamW: 0.01-0.1, SGD: 1e-4-5e-4, L2 under Adam: "
                   f"1e-5-1e-4){coupled}; keep norms, biases and embeddings out of it (optim.no_decay).")


def _optimizer(run: RunData) -> str:
    return str(run.cfg("optim._target_") or "").rsplit(".", 1)[-1]


def _coupled_adaptive(run: RunData) -> bool:
    """An adaptive optimizer whose weight_decay is L2 in the gradient (torch's Adam, not AdamW)."""
    return _optimizer(run) in COUPLED_ADAPTIVE and not run.cfg("optim.decoupled_weight_decay", False)


def _coupled_pull(run: RunData, wd: float, shrunk: list[str]) -> float | None:
    """Median over the shrunk tensors of wd * |w| / |loss gradient| over the run's last third."""
    pulls = []
    for key in shrunk:
        name = key.split("/", 1)[1]
        weight = run.series(key).finite().after_fraction(LATE_FRACTION)
        grad = run.series(GRAD_NORM + name).finite().after_fraction(LATE_FRACTION)
        both = np.intersect1d(weight.steps, grad.steps)
        if len(both):
            w, g = (np.median(s.values[np.isin(s.steps, both)]) for s in (weight, grad))
            pulls.append(float(wd * w / g) if g > 0 else math.inf)
    return float(np.median(pulls)) if pulls else None


def _weight_norms(run: RunData) -> tuple[list[str], np.ndarray, np.ndarray] | None:
    """(keys, start, end) norm of each weight tensor over the logging steps that recorded all of
    them; the end is the median of the last EDGE_POINTS."""
    keys = [k for k in run.keys(PARAM_NORM) if k.rsplit(".", 1)[-1].startswith("weight")]  # and weight_hh_l0
    rows = [r for r in run.train if keys and all(k in r for k in keys)]
    if len(rows) < 2 * EDGE_POINTS:
        return None
    values = np.array([[float(r[k]) for k in keys] for r in rows])
    return keys, values[0], np.median(values[-EDGE_POINTS:], axis=0)
