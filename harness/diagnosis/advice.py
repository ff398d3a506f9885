"""Fix text that depends on the run's own config: name the setting that most likely caused a
symptom before the generic advice, so the report reads like a reviewer who saw the config."""
from __future__ import annotations

from harness.diagnosis.load import RunData


def instability_fixes(run: RunData) -> str:
    """For diverging and oscillating losses: the config's own suspects, then the standard remedies."""
    fixes = []
    accum = run.summed_micro_batches
    if accum:
        fixes.append(f"accum_reduction=sum adds up {accum} micro-batch gradients instead of averaging them "
                     f"(a {accum}x gradient, a {accum}x LR for SGD): use accum_reduction=mean")
    if run.cfg("model.ln_position") == "post":
        fixes.append("post-LN transformers need a warmup: set schedule.warmup, or use model.ln_position=pre")
    elif run.warmup == 0:
        fixes.append("there is no warmup: set schedule.warmup (e.g. 5% of trainer.max_steps)")
    if run.config and not run.cfg("clip"):
        fixes.append("clipping is off: set clip=1.0")
    lr = run.cfg("optim.lr")
    fixes.append(f"lower optim.lr{f' (now {lr:g})' if isinstance(lr, (int, float)) else ''} by 3-10x; "
                 "`mode=lr_find` suggests one")
    return "; ".join(fixes) + "."
