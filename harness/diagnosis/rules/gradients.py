"""Rules read off the gradient and weight statistics: clipping, vanishing gradients, dead ReLUs,
weight-norm runaway, parameters the loss never reaches. Per-layer rules need the monitors
(`monitor=basic` or `full`) and stay silent without them."""
from __future__ import annotations

import re

import numpy as np

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData, Series
from harness.diagnosis.remedies import bound_gradients, clear_gradient_path, revive_units, unpin_clip
from harness.diagnosis.rules.common import (LATE_FRACTION, MIN_ROWS, fp16_unscaled, learned_clearly, name_some,
                                            solved, zero_gradient_tensors)
from harness.diagnosis.signals import end_level, fmt, level_at
from harness.core.metric_names import (ACT_DEAD, GRAD_CLIP_RATE, GRAD_DEAD, GRAD_NORM, GRAD_NORM_MAX, GRAD_NORM_PRECLIP,
                                  GRAD_TENSORS_WITHOUT, PARAM_NORM_TOTAL, TRAIN_LOSS)

# Clip pinned: clipping acted on >=90% of updates and the median pre-clip norm is >=10x the
# threshold, i.e. nearly every update is shrunk 10x or more: the LR actually used is not the
# configured one. Clipping is meant to catch outliers (a few % of updates).
PIN_RATE = 0.9
PIN_RATIO = 10.0
# Clip never reached: no logged update was clipped and the largest logged pre-clip norm stayed
# below 10% of the threshold: the clip cannot catch even a 10x spike, so it protects nothing.
NEVER_FRACTION = 0.1
# Adam divides by sqrt(v) + eps: a clip so small that the clipped gradients' elements approach eps
# (a norm of 1e4 x eps spread over a million weights is 10 x eps per element) makes eps dominate,
# so Adam no longer rescales the clip away and the update shrinks with it.
CLIP_NEAR_EPS = 1e4
# Vanishing gradients: the last repeated block's gradient norm is >=100x its first block's
# (same weight kind, median over kinds and over the logged steps of the run's last third: a
# post-LN GPT starts near 10x and collapses during training). Healthy deep ReLU MLPs and pre-LN
# GPTs measure 0.5-2x; a 10-layer sigmoid MLP 1e7x, a post-LN GPT without warmup 1e5x.
VANISH_RATIO = 100.0
# ... or every weight's gradient norm sits at or below 1e-8 (median over tensors and the last
# third): Adam's eps, below which its update is lr * g / eps ~ nothing, and an SGD step moves a
# weight by 1e-8 * lr. Healthy runs measure 1e-4 to 10; a plain 24-conv ReLU stack with torch's
# default init measures ~1e-12 (its forward signal shrinks ~2.4x per layer).
VANISHED_NORM = 1e-8
# Dead ReLUs: >=50% of a layer's units output 0 for every sample of a logged batch over the last
# third of the run: measured by forward hooks (act_dead, monitor=full), else by the share of a
# layer's units whose weight row and bias got exactly zero gradient (grad_dead, monitor=basic; in
# a model with ReLUs that is a unit at 0 for the whole batch); healthy ReLU layers sit at 0-15%.
# Critical from 90% (or with no measured fraction, all of a tensor's gradient zero): such a layer
# passes almost no signal. Below that it is a warning: the model lost capacity but may still learn
# (an MLP reading regression data in target order: 84% dead, loss 2.5% of the prior's). Next to a
# plateau it is the cause and rises to critical either way (rules.CAUSES).
DEAD_CRITICAL = 0.9
DEAD_UNITS = 0.5
# Weight-norm runaway: the total parameter norm at least doubles over the second half of the
# run. Healthy runs grow fastest early and settle (weight decay balances the updates). A warning
# when the growth bought nothing: the train loss ended less than 10% below its mid-run level. While
# the loss still falls, growing weights are a saturating output (sigmoid, softmax) buying margin on
# separable data, which the loss rewards: said as info.
RUNAWAY_LATE_GROWTH = 2.0
RUNAWAY_PAID_DROP = 0.10

# A tensor with no gradient is a fact of the graph, not a trend: a few logged steps show it. A
# short run at the default logging (300 steps: 12 rows) has fewer than MIN_ROWS in its last third.
UNUSED_ROWS = 3

# Exploding gradients: with no norm clipping to bound the update, some log window's largest
# pre-clip gradient norm is >= 10x the median of the windows logged before it, past the run's
# first 10% (early norms are large by nature). Healthy unclipped runs stay within 2-4x; a tanh RNN
# under SGD at lr 0.5 without clipping reaches ~100x. The windows before it, not the whole run:
# a gradient shrinks with its loss (full-batch Adam on a regression whose loss fell 1e4x: its
# late norms are 40x below its early ones), and a burst is a rise above what came before.
EXPLODE_RATIO = 10.0
SETTLE_FRACTION = 0.1
EXPLODE_BASELINE_WINDOWS = 3  # windows a burst is compared against, at least
# A solved task (common.solved) has neither exploding nor vanishing gradients, and its dead units
# are the ones its solution does not need: dead_relu says so as info.
RELU_TYPES = ("ReLU", "ReLU6")  # units that output exactly 0 for every negative input (LeakyReLU never does)
RECURRENT_TYPES = ("LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell")

_INDEX = re.compile(r"(?<=\.)\d+(?=\.)")  # the layer index in "blocks.3.attn.c_attn.weight"


def clip_pinned(run: RunData) -> Finding | None:
    clip = _norm_clip(run)
    rate, pre = run.series(GRAD_CLIP_RATE).finite(), run.series(GRAD_NORM_PRECLIP).finite()
    if clip is None or len(rate) < MIN_ROWS or not len(pre):
        return None
    mean_rate, ratio = float(rate.values.mean()), float(np.median(pre.values)) / clip
    if mean_rate < PIN_RATE or ratio < PIN_RATIO:
        return None
    p90 = float(np.percentile(pre.values, 90))
    eps = run.cfg("optim.eps")
    near_eps = isinstance(eps, (int, float)) and clip <= CLIP_NEAR_EPS * eps
    if near_eps:
        adam = (f"and clip={fmt(clip)} is so small that the clipped gradients approach optim.eps={fmt(eps)}: "
                "Adam no longer rescales the clip away, its updates shrink with it")
    else:
        adam = "Adam-like optimizers rescale it away, but then the clip no longer singles out spikes"
    # an optimizer that normalises the gradient's scale (Adam, Lion, LAMB, Muon) updates alike however
    # it is clipped: the clip only stopped catching spikes, which is no harm done yet
    target = str(run.cfg("optim._target_") or "")
    rescaled = bool(target) and not near_eps and not target.endswith("SGD")
    fixes = []
    accum = run.summed_micro_batches
    if accum:
        fixes.append(f"accum_reduction=sum with accum={accum} makes every gradient {accum}x too large: set "
                     "accum_reduction=mean first, then look again")
    fixes.append(f"raise clip to about the 90th percentile of the pre-clip norm (here {fmt(p90)}) or a few times "
                 "the typical norm, so that it only catches spikes; or lower optim.lr on purpose")
    return Finding("clip_pinned", Severity.INFO if rescaled else Severity.WARNING,
                   "the gradient norm is pinned at the clip threshold",
                   f"clipping acted on {mean_rate:.0%} of updates; median pre-clip norm {fmt(ratio * clip)} vs "
                   f"clip={fmt(clip)}: every gradient is shrunk ~{fmt(ratio)}x (for SGD a {fmt(ratio)}x smaller LR; "
                   f"{adam}).", "; ".join(fixes) + ".", unpin_clip(run, clip, p90))


def clip_never_reached(run: RunData) -> Finding | None:
    clip = _norm_clip(run)
    rate, pre = run.series(GRAD_CLIP_RATE).finite(), run.series(GRAD_NORM_PRECLIP).finite()
    if clip is None or len(pre) < MIN_ROWS or rate.values.any():
        return None
    largest = float(pre.values.max())
    if largest >= NEVER_FRACTION * clip:
        return None
    return Finding("clip_never_reached", Severity.INFO, "the clip threshold is far above every gradient norm",
                   f"largest logged pre-clip norm {fmt(largest)} (step {int(pre.steps[int(pre.values.argmax())])}) "
                   f"vs clip={fmt(clip)}; no update was clipped.",
                   f"set clip to a few times the typical norm (median here {fmt(float(np.median(pre.values)))}) "
                   "so it can stop a spike, or null to say clipping is off.")


def exploding_gradients(run: RunData) -> Finding | None:
    peaks = run.series(GRAD_NORM_MAX).after_fraction(SETTLE_FRACTION)
    if _norm_clip(run) is not None or len(peaks.finite()) < MIN_ROWS or solved(run):
        return None
    ratios, baselines = _over_before(peaks.values)
    worst = int(np.argmax(ratios))
    if ratios[worst] < EXPLODE_RATIO:
        return None
    peak, step, typical = float(peaks.values[worst]), int(peaks.steps[worst]), float(baselines[worst])
    bursts = int(np.sum(ratios >= EXPLODE_RATIO))
    first = int(peaks.steps[int(np.argmax(ratios >= EXPLODE_RATIO))])  # a remedy restarts before it
    recurrent = any(name in (run.summary.get("modules") or []) for name in RECURRENT_TYPES)
    clip_text = ("clip=1.0 (0.5-1.0 for recurrent models: backpropagation through time multiplies the "
                 "gradient by the recurrent weights once per step)" if recurrent else "clip=1.0")
    learned = learned_clearly(run)  # the bursts did the run no lasting harm: worth knowing, no warning
    return Finding("exploding_gradients", Severity.INFO if learned else Severity.WARNING,
                   "the gradient norm explodes and nothing bounds the update",
                   f"largest pre-clip gradient norm {fmt(peak)} at step {step}, {fmt(peak / typical)}x the median "
                   f"{fmt(typical)} of the windows before it; {bursts} log window(s) at >= {EXPLODE_RATIO:g}x "
                   "what came before; clipping is off" + ("; the run learned clearly all the same." if learned else "."),
                   f"{clip_text}; guard=default skips the worst updates; lower optim.lr.",
                   bound_gradients(run, recurrent, first))


def _over_before(peaks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per window: its peak over the median of the finite peaks logged before it (inf for a
    non-finite peak), and that median. The first windows have too few before them and are
    measured against the whole run's median (a burst right after the settling part)."""
    ratios, baselines = np.zeros(len(peaks)), np.full(len(peaks), np.nan)
    finite = peaks[np.isfinite(peaks)]
    for i, peak in enumerate(peaks):
        before = peaks[:i][np.isfinite(peaks[:i])]
        before = before if len(before) >= EXPLODE_BASELINE_WINDOWS else finite
        if not len(before) or np.median(before) <= 0:
            continue
        baselines[i] = float(np.median(before))
        ratios[i] = peak / baselines[i] if np.isfinite(peak) else np.inf
    return ratios, baselines


def vanishing_gradients(run: RunData) -> Finding | None:
    if solved(run):
        return None
    return _early_blocks_starved(run) or _vanished_everywhere(run)


def _vanished_everywhere(run: RunData) -> Finding | None:
    """Every layer's gradient is ~0: the signal died in the forward pass (a plain deep stack with
    a variance-shrinking init), so the gradients of all weights are equally tiny and their ratio
    says nothing."""
    weights = [k for k in run.keys(GRAD_NORM) if k.endswith("weight")]
    late = [run.series(k).finite().after_fraction(LATE_FRACTION).values for k in weights]
    medians = [float(np.median(v)) for v in late if len(v)]
    if len(medians) < 2 or fp16_unscaled(run):
        return None
    typical = float(np.median(medians))
    if not 0 < typical <= VANISHED_NORM:
        return None
    return Finding("vanishing_gradients", Severity.CRITICAL, "no layer gets a usable gradient",
                   f"the median weight tensor's gradient norm is {fmt(typical)} over the run's last third "
                   f"({len(medians)} tensors; at or below {VANISHED_NORM:g}, Adam's eps, an update is a vanishing "
                   "fraction of the LR): the forward signal fades through the layers, so every gradient does.",
                   _vanishing_fix(run), clear_gradient_path(run))


def _early_blocks_starved(run: RunData) -> Finding | None:
    rows = block_ratios(run)
    if not rows:
        return None
    cut = rows[0][0]["step"] + LATE_FRACTION * (rows[-1][0]["step"] - rows[0][0]["step"])
    rows = [(row, ratios) for row, ratios in rows if row["step"] >= cut]  # where the run ended up
    ratio = float(np.median([np.median(list(r.values())) for _, r in rows]))
    if ratio < VANISH_RATIO:
        return None
    row, ratios = rows[-1]
    early, late = sorted(ratios, key=ratios.get)[len(ratios) // 2]  # the median kind, as an example
    return Finding("vanishing_gradients", Severity.CRITICAL, "early layers get almost no gradient",
                   f"gradient norm of the last / the first block = {fmt(ratio)} (median over weight kinds and the "
                   f"{len(rows)} logged steps of the run's last third); at step {row['step']}: "
                   f"{early.split('/', 1)[1]} {fmt(row[early])} vs {late.split('/', 1)[1]} {fmt(row[late])}.",
                   _vanishing_fix(run), clear_gradient_path(run))


def block_ratios(run: RunData) -> list[tuple[dict, dict[tuple[str, str], float]]]:
    """Per logged row: the late/early gradient-norm ratio of every weight kind of the model's
    numbered blocks (`hidden.0...` vs `hidden.8...`); an exactly-zero early norm counts as inf."""
    pairs = _block_pairs(run.keys(GRAD_NORM))
    rows = []
    for row in run.train:
        ratios = {}
        for early, late in pairs:
            low, high = row.get(early), row.get(late)
            if low is None or high is None or not np.isfinite([low, high]).all() or low == high == 0:
                continue
            ratios[(early, late)] = high / low if low > 0 else np.inf
        if ratios:
            rows.append((row, ratios))
    return rows


def block_ratio_series(run: RunData) -> Series:
    """The median late/early ratio per logged step: what vanishing_gradients judges, for plotting."""
    rows = block_ratios(run)
    return Series(np.array([row["step"] for row, _ in rows], dtype=np.int64),
                  np.array([np.median(list(r.values())) for _, r in rows], dtype=np.float64))


def dead_relu(run: RunData) -> Finding | None:
    measured = _late_medians(run, ACT_DEAD)
    source = "dead-unit fraction (0 for every sample of the batch)"
    relu, underflow = _has_relu(run), fp16_unscaled(run)  # fp16 underflow zeroes gradients too
    relu_judged = relu and not underflow
    if not measured and not underflow:
        # Judged by effect, on any model: a unit whose weights get exactly zero gradient for every
        # sample is dead, whether a ReLU module, torch.relu in a forward, or a saturated tanh,
        # sigmoid or far-negative GELU flattened it.
        measured = _late_medians(run, GRAD_DEAD)
        source = "share of units whose weights got exactly zero gradient (0 for every sample of the batch)"
    worst = {k.split("/", 1)[1]: v for k, v in measured.items() if v >= DEAD_UNITS}
    if worst:
        evidence = f"{source} over the last third of the run: " + \
                   ", ".join(f"{name} {v:.0%}" for name, v in worst.items()) + "."
    elif not measured and relu_judged:
        frozen = _fed_by_relus(run, zero_gradient_tensors(run))
        if not frozen:
            return None
        evidence = (f"{len(frozen)} weight tensor(s) got exactly zero gradient on every logged step of the last "
                    f"third of the run ({name_some(frozen)}): every ReLU feeding them outputs 0.")
    else:
        return None
    severity = Severity.CRITICAL if max(worst.values(), default=1.0) >= DEAD_CRITICAL else Severity.WARNING
    early = _dead_from_the_start(run, [k for k in measured if k.split("/", 1)[1] in worst])
    remedies = revive_units(run, early)
    if solved(run):
        evidence += " The train loss fell to 1/1000 of its start: the task is solved without them."
        severity, remedies = Severity.INFO, ()  # units the task did not need are nothing to revive
    elif learned_clearly(run):
        evidence += " The val loss still ended well below what a model blind to its inputs gets: capacity lost, not learning."
        severity = Severity.INFO
    if relu:
        return Finding("dead_relu", severity, "ReLU units died: they output 0 and never recover", evidence,
                       "lower optim.lr (one huge update pushes pre-activations negative for good) and keep clip on; "
                       "model.activation=gelu or silu never go fully flat; model.norm=layer keeps pre-activations "
                       "centred; init=kaiming.", remedies)
    return Finding("dead_relu", severity, "units died: their activation is flat (0, or saturated) for every sample",
                   evidence + " The model has no ReLU module: a torch.relu/F.relu call in its forward, or a "
                   "tanh/sigmoid driven into saturation, does this.",
                   "lower optim.lr and keep clip on (one huge update pushes pre-activations where the activation "
                   "is flat); normalise the pre-activations (LayerNorm before the activation); a GELU/SiLU "
                   "instead of relu in the forward; init=kaiming for ReLU, xavier for tanh.", remedies)


def _dead_from_the_start(run: RunData, keys: list[str]) -> bool:
    """Whether a dead layer was already >= DEAD_UNITS dead at its first collection: the init, not
    an update, silenced it."""
    first = [run.series(key).finite().values[:1] for key in keys]
    return any(len(v) and v[0] >= DEAD_UNITS for v in first)


def _late_medians(run: RunData, prefix: str) -> dict[str, float]:
    """Per logged key under `prefix`: its median over the run's last third."""
    late = {key: run.series(key).finite().after_fraction(LATE_FRACTION) for key in run.keys(prefix)}
    return {key: float(np.median(s.values)) for key, s in late.items() if len(s)}


def _fed_by_relus(run: RunData, frozen: list[str]) -> list[str]:
    """The zero-gradient weight tensors less the model's first one, which reads the data, not a
    ReLU's output: its zero gradient means an input zeroed before the model, not dead units."""
    weights = [k.split("/", 1)[1] for k in run.keys(GRAD_NORM) if k.endswith("weight")]
    return frozen[1:] if weights and frozen and frozen[0] == weights[0] else frozen


def _has_relu(run: RunData) -> bool:
    """ReLUs anywhere in the model: by its module types (any model, a user's included) or by our config."""
    return run.cfg("model.activation") == "relu" or any(t in RELU_TYPES for t in run.summary.get("modules") or [])


def weight_norm_runaway(run: RunData) -> Finding | None:
    norm = run.series(PARAM_NORM_TOTAL).finite()
    if len(norm) < MIN_ROWS:
        return None
    mid_step = (norm.steps[0] + norm.steps[-1]) / 2
    mid = float(norm.values[int(np.argmin(np.abs(norm.steps - mid_step)))])
    end = float(norm.values[-1])
    if end < RUNAWAY_LATE_GROWTH * mid:
        return None
    loss = run.series(TRAIN_LOSS).finite()
    loss_mid, loss_end = level_at(loss, int(mid_step)), end_level(loss)
    paid = len(loss) >= MIN_ROWS and loss_end <= (1 - RUNAWAY_PAID_DROP) * loss_mid
    evidence = (f"total parameter norm {fmt(float(norm.values[0]))} at step {int(norm.steps[0])}, {fmt(mid)} at "
                f"mid-run, {fmt(end)} at step {int(norm.steps[-1])} ({fmt(end / mid)}x over the second half); the "
                f"train loss went {fmt(loss_mid)} -> {fmt(loss_end)} meanwhile")
    if paid:
        return Finding("weight_norm_runaway", Severity.INFO, "the weights keep growing while the loss falls",
                       evidence + ": a saturating output (sigmoid, softmax) growing its margin on data it "
                       "separates; harmless while the loss pays for it.",
                       "weight decay (optim.weight_decay) or label smoothing bound it if the logits must stay "
                       "calibrated.")
    return Finding("weight_norm_runaway", Severity.WARNING, "the weights keep growing",
                   evidence + ": the growth bought no progress.",
                   "add or raise weight decay (optim.weight_decay, e.g. 0.1 with AdamW); lower optim.lr; "
                   "normalisation layers (model.norm=layer) or qk_norm keep activations bounded.")


def _norm_clip(run: RunData) -> float | None:
    clip = run.cfg("clip")
    return float(clip) if clip and run.cfg("clip_mode", "norm") == "norm" else None


def _block_pairs(keys: list[str]) -> list[tuple[str, str]]:
    """(first block's key, last block's key) for every weight kind of a numbered, repeated block
    (`hidden.0.linear.weight` / `hidden.8.linear.weight`); biases only when a block has no weights.
    Empty when the model has no numbered blocks."""
    by_kind: dict[str, dict[int, str]] = {}
    for key in keys:
        match = _INDEX.search(key)
        if match:
            kind = key[: match.start()] + "*" + key[match.end():]
            by_kind.setdefault(kind, {})[int(match.group())] = key
    pairs = [(layers[min(layers)], layers[max(layers)]) for layers in by_kind.values() if len(layers) > 1]
    return [p for p in pairs if p[0].endswith("weight")] or pairs


def _vanishing_fix(run: RunData) -> str:
    fixes = []
    if run.cfg("model.ln_position") == "post":
        fixes.append("post-LN: use model.ln_position=pre; or keep post-LN with a much lower optim.lr and a "
                     "warmup (schedule.warmup)")
    if run.cfg("model.activation") in ("sigmoid", "tanh"):
        fixes.append(f"{run.cfg('model.activation')} saturates: model.activation=relu or gelu")
    if run.cfg("model.residual") is False:
        fixes.append("model.residual=true gives gradients a path around each layer")
    if run.cfg("model.norm") == "none":
        fixes.append("model.norm=layer keeps every layer's input in range")
    fixes.append("a depth-aware init (init=kaiming for ReLU MLPs, init=scaled_residual for transformers)")
    return "; ".join(fixes) + "."


def unused_parameters(run: RunData) -> Finding | None:
    """Trainable tensors that got no gradient at all (None, not zero) on every logged step of the
    last third (its last UNUSED_ROWS at least): built and handed to the optimizer, never reached by
    the loss. Weight decay still shrinks them under AdamW, and DDP refuses such models without
    find_unused_parameters."""
    logged = run.series(GRAD_TENSORS_WITHOUT).finite()
    rows = max(len(logged.after_fraction(LATE_FRACTION)), UNUSED_ROWS)
    missing = Series(logged.steps[-rows:], logged.values[-rows:])
    if len(missing) < UNUSED_ROWS or missing.values.min() < 1:
        return None
    count = int(missing.values.min())
    return Finding("unused_parameters", Severity.WARNING, "some trainable parameters never get a gradient",
                   f"{count} trainable tensor(s) had no gradient (None) on every logged step from step "
                   f"{int(missing.steps[0])} on: the loss does not depend on them.",
                   "find the module that is built but not used in forward (or used under torch.no_grad(), or "
                   "through .detach() / .item()); remove it, call it, or set requires_grad=False on it; "
                   "`mode=doctor` names the tensors.")
