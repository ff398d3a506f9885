"""Every metric's name, in one place: the trainer and the monitor write them, the tracker and
the diagnosis (rules, plots) read them back from metrics.jsonl. A name changed here changes
everywhere; a name written as a literal elsewhere would drift (a test checks there is none)."""
from __future__ import annotations

# once per logging window (train) or eval (val)
TRAIN_LOSS = "train/loss"
TRAIN_LOSS_MAX = "train/loss_max"  # the window's worst single update, skipped ones included
TRAIN_LOSS_FIRST = "train/loss_first"  # the untrained model's first update, first window only
TRAIN_LR = "train/lr"
TRAIN_EPOCH = "train/epoch"
TRAIN_SKIPPED = "train/skipped_steps"
TRAIN_EMPTY = "train/empty_steps"
TRAIN_LOSS_SCALE = "train/loss_scale"
TRAIN_OVERFLOWS = "train/overflow_steps"
GRAD_NORM_PRECLIP = "grad/norm_preclip"
GRAD_NORM_POSTCLIP = "grad/norm_postclip"
GRAD_NORM_MAX = "grad/norm_max"
GRAD_CLIP_RATE = "grad/clip_rate"
GRAD_TENSORS_WITHOUT = "grad/tensors_without_grad"
PARAM_NORM_TOTAL = "param/norm_total"
PERF_STEP_MS = "perf/step_time_ms"
PERF_TOKENS = "perf/tokens_per_s"
PERF_SAMPLES = "perf/samples_per_s"
PERF_MFU = "perf/mfu"
VAL_LOSS = "val/loss"
VAL_ACCURACY = "val/accuracy"
VAL_LOSS_ON_TRAIN = "val/loss_on_train"  # training samples in eval mode (models with batch norm or dropout)
TEST_LOSS = "test/loss"  # mode=eval only: the held-out test split
VAL_LABEL_ACCURACY = "val/label_accuracy"  # multi-label (loss.function=bce): labels on the side of their target
VAL_PERPLEXITY = "val/perplexity"  # token data: exp(val loss)
# every measured metric (metrics.NAME, the built-in ones): val/NAME at each eval, test/NAME in mode=eval
VAL_PREFIX = "val/"
TEST_PREFIX = "test/"
# an objective's named parts (loss._target_ returning {"loss": ..., "kl": ...}): train/loss/kl, val/loss/kl
TRAIN_LOSS_PART = "train/loss/"
VAL_LOSS_PART = "val/loss/"
TEST_LOSS_PART = "test/loss/"
VAL_EFFECTIVE_RANK = "val/effective_rank"  # an open objective's output embeddings: exp(singular-value entropy)

# families: the prefix, then a parameter tensor's or a module's name (the monitor's statistics)
GRAD_NORM = "grad_norm/"
PARAM_NORM = "param_norm/"
UPDATE_RATIO = "update_ratio/"
GRAD_DEAD = "grad_dead/"
ACT_DEAD = "act_dead/"
ACT_MEAN = "act_mean/"
ACT_STD = "act_std/"
ATTN_ENTROPY = "attn_entropy/"
GRAD_SHARE = "grad_share/"  # a multi-part objective: each part's share of the loss's gradient (monitor steps)


def flat(name: str) -> str:
    """A metric as a JSON field or user-attribute key (eval.json, a sweep's study): val/loss -> val_loss."""
    return name.replace("/", "_")
