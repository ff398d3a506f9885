"""Which samples a skipped update held, and whether the evidence points at them rather than at the
model: the guard's answer to "a NaN or a spike: is it the data or the learning rate?".

The update's samples are read again and scored one by one with the model as it stands (the bad
update was not applied, so that is the model that met them). The data is the likely cause when a
few samples stand out from the rest of their batch: a non-finite input or loss, a loss far above
the batch's upper quartile, or an input far larger than the others. When every sample's loss is up, the
model is the cause (an LR too high, a missing warmup or clip)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from harness.core.sample_records import describe_sample
from harness.training.loss import per_sample_loss
from harness.models.output import OutputPicker

LOSS_RATIO = 20.0  # a sample's loss > 20x its batch's upper quartile
NORM_RATIO = 10.0  # a sample's input norm > 10x its batch's median
FEW = 0.25  # at most a quarter of the batch: a cause shared by most samples is no outlier
SHOWN = 4


@dataclass(frozen=True)
class Attribution:
    data_cause: bool
    samples: list[dict[str, float]]  # the most suspect samples: index, loss, input_norm (None: integer inputs)
    median_loss: float
    median_norm: float | None

    def describe(self) -> str:
        """One clause for the skip event's message."""
        norm = f", input norm {self.median_norm:.3g}" if self.median_norm is not None else ""
        shown = ", ".join(describe_sample(s) for s in self.samples)
        if self.data_cause:
            return f"samples {shown} stand out from the batch (median loss {self.median_loss:.3g}{norm})"
        return f"no sample stands out (median loss {self.median_loss:.3g}{norm}; worst {shown})"


@torch.no_grad()
def attribute(model: nn.Module, pick_output: OutputPicker, x: torch.Tensor, y: torch.Tensor,
              indices: list[int], task: str, ignore_index: int | None = None,
              function: str | None = None) -> Attribution:
    """Score each sample of a skipped update; `indices` are their dataset indices, in batch order."""
    was_training = model.training
    model.eval()  # no dropout noise, no batch-norm statistics updated by a diagnostic pass
    try:
        losses = per_sample_loss(pick_output(model(x)), y, task, ignore_index, function).double().cpu()
    finally:
        model.train(was_training)
    norms = None
    if x.is_floating_point():
        flat = x.reshape(len(x), -1).double().cpu()
        norms = torch.where(flat.isfinite().all(1), flat.norm(dim=1), torch.tensor(math.inf, dtype=torch.double))
    finite = losses[losses.isfinite()]
    median_loss = float(finite.median()) if len(finite) else math.nan
    median_norm = float(norms[norms.isfinite()].median()) if norms is not None and norms.isfinite().any() else None
    broken = _nonfinite_rows(y) | (~norms.isfinite() if norms is not None else False)
    if broken.any():  # a NaN/Inf input or target in a few samples: the strongest evidence there is
        suspect = broken
    else:  # against the batch's upper quartile: a converged model's easy samples make the median ~0. A
        # non-finite loss on finite data is the model's forward, not the sample's: no suspect by itself.
        quartile = float(finite.quantile(0.75)) if len(finite) else math.inf
        suspect = losses.isfinite() & (losses > LOSS_RATIO * max(quartile, 1e-12))
        if norms is not None and median_norm is not None:
            suspect |= norms > NORM_RATIO * max(median_norm, 1e-12)
    count = int(suspect.sum())
    data_cause = 0 < count <= max(1, FEW * len(losses))
    order = torch.argsort(torch.nan_to_num(losses, nan=math.inf), descending=True)
    if data_cause:
        order = torch.cat([order[suspect[order]], order[~suspect[order]]])
    samples = [{"index": indices[i], "loss": float(losses[i]),
                "input_norm": float(norms[i]) if norms is not None else None} for i in order[:SHOWN].tolist()]
    if data_cause:
        samples = samples[:min(SHOWN, count)]
    return Attribution(data_cause, samples, median_loss, median_norm)


def _nonfinite_rows(y: torch.Tensor) -> torch.Tensor:
    """Per sample: whether a floating-point target holds a NaN/Inf (integer labels cannot)."""
    if not y.is_floating_point():
        return torch.zeros(len(y), dtype=torch.bool)
    return ~y.reshape(len(y), -1).isfinite().all(1).cpu()
