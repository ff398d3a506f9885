"""Rule about attention heads (logged by monitor=full for models that record their entropy)."""
from __future__ import annotations

import numpy as np

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.signals import EDGE_POINTS, fmt
from harness.core.metric_names import ATTN_ENTROPY

# Collapse: the mean entropy of the heads' attention ended below 30% of where it started. At init a
# causal head spreads over its context (~ln of the mean context length: 2.5 nats at block 32);
# healthy heads specialise but keep ~90% of that on average in the pathology suite, some heads
# pointing at one token while others spread; collapsed runs (high LR, no QK-norm: attention
# logits grow until softmax saturates) end at 10-15%, every head on one token.
COLLAPSED_SHARE = 0.3
ONE_TOKEN = 0.1  # nats: a head this low attends to a single position


def attention_entropy_collapse(run: RunData) -> Finding | None:
    keys = run.keys(ATTN_ENTROPY)
    if not keys:
        return None
    rows = [r for r in run.train if keys[0] in r]
    if len(rows) < 2 * EDGE_POINTS:
        return None
    per_head = np.array([[float(r.get(k, np.nan)) for k in keys] for r in rows])
    means = np.nanmean(per_head, axis=1)
    start, end = float(means[0]), float(np.median(means[-EDGE_POINTS:]))
    if not start > 0 or end >= COLLAPSED_SHARE * start:
        return None
    pointed = int((per_head[-1] < ONE_TOKEN).sum())
    qk_norm = run.cfg("model.qk_norm")
    fixes = [] if qk_norm or qk_norm is None else ["model.qk_norm=true (normalises queries and keys, so attention "
                                                   "logits cannot grow without bound)"]
    fixes += ["lower optim.lr 2-3x or lengthen schedule.warmup", "clip=1.0", "loss.z_loss=1e-4 if the output "
              "logits grow too"]
    return Finding("attention_entropy_collapse", Severity.WARNING, "the attention heads collapsed onto single tokens",
                   f"mean attention entropy per head {fmt(start)} nats at step {rows[0]['step']}, {fmt(end)} at "
                   f"the end ({end / start:.0%} of its start); {pointed} of {len(keys)} heads below {ONE_TOKEN} "
                   f"nats at step {rows[-1]['step']}.",
                   "; ".join(fixes) + ".")
