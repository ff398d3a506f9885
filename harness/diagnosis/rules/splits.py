"""The training and validation splits compared (summary.json's `split_contrast`, measured when the
run was built): preprocessing applied to one split only leaves marks that no curve explains. A
model trained on one class, or on constant targets, learns nothing; one validated on classes it
never saw, or on inputs 255x larger than its training inputs, is scored on a task it was not given.
No remedy: the fix is in the user's data code."""
from __future__ import annotations

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData
from harness.diagnosis.signals import fmt

# A tenth of the validation samples in classes the training sample never holds: a rare class can be
# missing from a sampled training split, a tenth of the validation split cannot, unless the splits
# were labelled differently (or split by class).
UNSEEN_SHARE = 0.1
# The inputs' typical norm 10x apart between the splits, the bar for unnormalised inputs: the same
# preprocessing keeps it within a few percent, train-only augmentation within tens of percent;
# pixels divided by 255 on one split only put it at 255.
SPLIT_NORM_RATIO = 10.0


def split_mismatch(run: RunData) -> Finding | None:
    contrast = run.summary.get("split_contrast") or {}
    marks = []
    if contrast.get("train_classes") == 1:
        (only,) = contrast.get("train_class_values") or ["?"]
        marks.append(f"every sampled training label is class {only}, while the validation labels hold "
                     f"{contrast.get('val_classes')} classes: there is nothing to learn but that class")
    elif (contrast.get("val_share_unseen") or 0) >= UNSEEN_SHARE:
        marks.append(f"{contrast['val_share_unseen']:.0%} of the sampled validation labels are classes the "
                     f"training split never holds ({contrast.get('train_classes')} training classes, "
                     f"{contrast.get('val_classes')} validation classes)")
    if contrast.get("train_target_spread") == 0:
        marks.append("every training target has the same value: there is nothing to learn")
    ratio = contrast.get("val_over_train_input_norm")
    if ratio and not 1 / SPLIT_NORM_RATIO <= ratio <= SPLIT_NORM_RATIO:
        marks.append(f"a typical validation input's norm is {fmt(ratio)}x a typical training input's: one split "
                     "was scaled and the other was not")
    if not marks:
        return None
    return Finding("split_mismatch", Severity.CRITICAL, "the training and validation splits were prepared "
                   "differently", "; ".join(marks) + ". The val loss measures another task than the one trained.",
                   "apply the same label and input preprocessing to every split, ideally in one function that "
                   "all splits pass through (a label divided or cast with the pixels, a filter or a mapping run "
                   "on one split only are the usual causes); print a few labels and the input range of each "
                   "split before training.")
