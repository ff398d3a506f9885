"""Checks on the data alone: labels that can teach something, inputs the model can read."""
from __future__ import annotations

from typing import Any

import torch

from harness.data import DataMeta
from harness.data.batch import tensors
from harness.modes.doctor.result import Outcome, Status
from harness.modes.doctor.sampling import read, sample_indices
from harness.assembly.assemble import Assembly

SAMPLES_PER_SPLIT = 2048  # enough to see any realistic label set vary; a single cheap gather


def num_classes(meta: DataMeta) -> int | None:
    """K: the vocabulary for token data, the classes for classification; None for regression."""
    return meta.vocab_size if meta.task == "lm" else meta.out_features if meta.task == "classification" else None


Samples = dict[str, tuple[torch.Tensor, torch.Tensor]]  # split -> (inputs, targets)


def _samples(built: Assembly) -> Samples:
    return {split: read(built, data, sample_indices(data, SAMPLES_PER_SPLIT))
            for split, data in (("train", built.train_set), ("val", built.val_set))}


def check_labels(built: Assembly) -> Outcome:
    if built.meta.user_loss is not None:
        return Outcome(Status.SKIP, f"loss {built.meta.user_loss} reads whole batches: no labels of the harness's")
    return judge_labels(_samples(built), built.meta)


def judge_labels(samples: Samples, meta: DataMeta) -> Outcome:
    """Labels vary (a constant target teaches nothing) and, for classes and tokens, lie in [0, K)."""
    if meta.task == "regression":
        return _regression_targets(samples)
    k = num_classes(meta)
    seen = []
    for split, (_, y) in samples.items():
        ignored = float((y == meta.ignore_index).float().mean()) if meta.ignore_index is not None else 0.0
        y = y[y != meta.ignore_index] if meta.ignore_index is not None else y
        if not len(y):
            return Outcome(Status.FAIL, f"every sampled {split} target is loss.ignore_index ({meta.ignore_index})",
                           "nothing would be learned: check that the labels are written (a collator masking "
                           "everything, a wrong target_key)")
        low, high = int(y.min()), int(y.max())
        if low < 0 or high >= k:
            return Outcome(Status.FAIL, f"{split} labels span [{low}, {high}], outside [0, {k})",
                               f"the model has {k} outputs: fix the label encoding or the data's "
                               f"{'vocab_size' if meta.task == 'lm' else 'num_classes'}")
        counts = torch.bincount(y.reshape(-1), minlength=k)
        if (counts > 0).sum() == 1:
            return Outcome(Status.FAIL, f"every sampled {split} label is {high}",
                           "a constant target teaches nothing: check how labels are read "
                           "(wrong column, a mask left on, a collapsed preprocessing step)")
        seen.append(f"{split}: {int((counts > 0).sum())} of {k} classes, most common "
                    f"{counts.max().item() / counts.sum().item():.0%}" + (f", {ignored:.0%} ignored" if ignored else ""))
    return Outcome(Status.PASS, "; ".join(seen))


def _regression_targets(samples: Samples) -> Outcome:
    seen = []
    for split, (_, y) in samples.items():
        y = y.double()
        if not torch.isfinite(y).all():
            return Outcome(Status.FAIL, f"{int((~torch.isfinite(y)).sum())} non-finite {split} targets",
                           "drop or impute the NaN/Inf targets: one of them makes the loss NaN")
        if y.std() == 0:
            return Outcome(Status.FAIL, f"every sampled {split} target is {y.flatten()[0].item():.4g}",
                           "a constant target teaches nothing: check how targets are read")
        seen.append(f"{split}: mean {y.mean().item():.3g}, std {y.std().item():.3g}")
    return Outcome(Status.PASS, "; ".join(seen))


def check_inputs(built: Assembly) -> Outcome:
    if built.meta.user_loss is not None:
        return judge_batches(_samples(built))
    return judge_inputs(_samples(built), built.meta.vocab_size)


def judge_batches(samples: dict[str, tuple[Any, None]]) -> Outcome:
    """Whole batches (the user's objective): every floating-point field is finite."""
    for split, (batch, _) in samples.items():
        bad = sum(int((~torch.isfinite(t)).sum()) for t in tensors(batch) if t.is_floating_point())
        if bad:
            return Outcome(Status.FAIL, f"{bad} NaN/Inf values in sampled {split} batches",
                           "clean or impute the data: one non-finite value poisons the whole batch")
    return Outcome(Status.PASS, f"every floating-point field of the sampled {' and '.join(samples)} batches is finite")


def judge_inputs(samples: Samples, vocab: int | None) -> Outcome:
    """Float inputs are finite; token ids index into the embedding table."""
    seen = []
    for split, (x, _) in samples.items():
        if x.is_floating_point():
            bad = int((~torch.isfinite(x)).sum())
            if bad:
                return Outcome(Status.FAIL, f"{bad} NaN/Inf values in sampled {split} inputs",
                               "clean or impute the inputs: one non-finite value poisons the whole batch")
            seen.append(f"{split}: finite, mean {x.mean().item():.3g}, std {x.std().item():.3g}")
            continue
        low, high = int(x.min()), int(x.max())
        if vocab is not None and (low < 0 or high >= vocab):
            return Outcome(Status.FAIL, f"{split} token ids span [{low}, {high}], outside [0, {vocab})",
                               "the embedding table would be indexed out of range: set data.vocab_size "
                               "(or DIR/meta.json) to the tokenizer's size")
        seen.append(f"{split}: ids in [{low}, {high}]" + (f" < vocab {vocab}" if vocab is not None else ""))
    return Outcome(Status.PASS, "; ".join(seen))
