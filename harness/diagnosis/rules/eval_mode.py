"""A model that fits its training samples in train mode but not in eval mode: batch norm's
running statistics (or another train/eval switch) disagree with what training computed.

Evaluating fixed training samples in eval mode (`val/loss_on_train`, logged for models with
batch norm or dropout) tells this apart from overfitting: an overfit model does well on its
training samples in either mode; here it fails on them as soon as it is switched to eval.
"""
from __future__ import annotations

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.rules.curves import MIN_EVALS
from harness.diagnosis.signals import fmt, level_at, start_level
from harness.core.metric_names import TRAIN_LOSS, VAL_LOSS, VAL_LOSS_ON_TRAIN

# The eval-mode loss on training samples is >= 1.5x the train-mode loss of the same steps at each
# of the last 3 evals (a gap that comes and goes is batch norm catching up with fast-moving weights,
# not one that fails). Healthy batch-norm runs measure 0.5-1.2x (eval mode is usually a little
# better: no batch noise); dropout only ever makes eval mode better. Running statistics that lag
# the weights (bn_momentum=0.001) measure ~18x after 200 steps, ~1.9x after 150 on a smaller net.
MODE_GAP_RATIO = 1.5
# ... and eval mode's excess is a material share of the loss the run started at: on a loss near
# zero (a degenerate label set), a ratio of two tiny losses is noise.
MODE_GAP_OF_START = 0.05
LAST_EVALS = 3
BATCH_NORM_TYPES = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm")


def mode_gap(run: RunData) -> float | None:
    """Eval-mode loss on training samples over the train-mode loss of the same steps, the least
    over the last evals, when eval mode's excess held a material share of the run's start loss at
    each of them; None without those evals or with an immaterial excess."""
    on_train = run.series(VAL_LOSS_ON_TRAIN, kind="eval").finite()
    train = run.series(TRAIN_LOSS).finite()
    if len(on_train) < MIN_EVALS or not len(train):
        return None
    last = range(len(on_train) - min(LAST_EVALS, len(on_train)), len(on_train))
    pairs = [(float(on_train.values[i]), level_at(train, int(on_train.steps[i]))) for i in last]
    if min(eval_mode - train_mode for eval_mode, train_mode in pairs) < MODE_GAP_OF_START * abs(start_level(train)):
        return None
    return min(eval_mode / max(train_mode, 1e-12) for eval_mode, train_mode in pairs)


def bn_eval_gap(run: RunData) -> Finding | None:
    ratio = mode_gap(run)
    if ratio is None or ratio < MODE_GAP_RATIO:
        return None
    on_train = run.series(VAL_LOSS_ON_TRAIN, kind="eval").finite()
    train = run.series(TRAIN_LOSS).finite()
    step = int(on_train.steps[-1])
    val = run.series(VAL_LOSS, kind="eval").finite()
    val_text = f"; val loss {fmt(float(val.values[-1]))}" if len(val) else ""
    return Finding("bn_eval_gap", Severity.CRITICAL, "the model works in train mode and fails in eval mode",
                   f"on the same training samples at step {step}: eval-mode loss {fmt(float(on_train.values[-1]))} vs "
                   f"train-mode loss {fmt(level_at(train, step))} (at least {fmt(ratio)}x at each of the last evals){val_text}. "
                   "Not overfitting: the model fails on the samples it trained on once switched to eval mode.",
                   _fix(run))


def _fix(run: RunData) -> str:
    modules = run.summary.get("modules") or []
    fixes = []
    if any(name in modules for name in BATCH_NORM_TYPES) or run.cfg("model.norm") == "batch":
        momentum = run.cfg("model.bn_momentum")
        shown = f" (now {momentum:g})" if isinstance(momentum, (int, float)) else ""
        fixes.append(f"batch norm's running statistics lag the weights: keep model.bn_momentum{shown} near torch's "
                     "0.1 (Keras' momentum=0.99 is 0.01 in torch); give batch norm >= 16 samples per micro-batch "
                     "(batch_size / accum); or model.norm=group or layer, which have no running statistics")
    fixes.append("a custom module that behaves differently under model.eval() is the other suspect")
    return "; ".join(fixes) + "."
