"""Validation passes: the mean loss (and accuracy for classification) and every metric (harness/training/metrics/)
over the same fixed samples every time (mode=eval: over a test split too), and, for models whose eval
mode differs (batch norm, dropout), the loss over fixed training samples in eval mode, which tells a
train/eval-mode gap apart from overfitting."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from harness.data import DataMeta
from harness.data.batch import batch_size, to_device
from harness.data.loader import EvalBatches
from harness.core.distributed import DistInfo, all_reduce_mean
from harness.training.loss import counted_targets
from harness.core.metric_names import (TEST_LOSS, TEST_LOSS_PART, TEST_PREFIX, VAL_ACCURACY,
                                       VAL_EFFECTIVE_RANK, VAL_LOSS, VAL_LOSS_ON_TRAIN, VAL_LOSS_PART, VAL_PERPLEXITY,
                                       VAL_PREFIX)
from harness.training.metrics.builtin import perplexity
from harness.training.metrics.measure import EvalMetrics
from harness.models.output import OutputPicker
from harness.models.probe import OUTPUT_ROWS, effective_rank, embedding_rows, output_directions
from harness.training.precision import Precision
from harness.training.objective import PRIOR_PART, LossFn, OpenObjective


def keep_rows(kept: list[torch.Tensor], rows: torch.Tensor) -> None:
    """Add a batch's output rows to those measured, up to OUTPUT_ROWS; a batch whose rows are
    another width (an output that depends on the batch, [B, B] scores, on a last partial batch)
    is left out rather than stacked."""
    if sum(map(len, kept)) < OUTPUT_ROWS and (not kept or rows.shape[1:] == kept[0].shape[1:]):
        kept.append(rows.detach().float())


class Evaluator:
    def __init__(self, *, model: nn.Module, pick_output: OutputPicker, precision: Precision, loss_fn: LossFn,
                 meta: DataMeta, batches: EvalBatches, train_batches: EvalBatches | None, prior: dict[str, Any],
                 device: torch.device, dist: DistInfo, open_objective: OpenObjective | None = None,
                 metrics: EvalMetrics | None = None) -> None:
        self.model, self.pick_output, self.precision, self.loss_fn = model, pick_output, precision, loss_fn
        self.open_objective = open_objective  # the user's objective or the model's loss: it scores whole batches
        self.meta, self.batches, self.train_batches, self.device, self.dist = meta, batches, train_batches, device, dist
        self.metrics = metrics or EvalMetrics([])
        # The prior of the very samples every eval scores: a model blind to its inputs cannot beat
        # its loss, nor (by more than sampling noise) the accuracy of always naming the largest class.
        self.prior = prior
        self.output_directions: dict[str, Any] | None = None  # of the logits, at the last eval (classification)
        self.last_parts: dict[str, float] = {}  # an open objective's parts at the last eval
        self.embedding_rank: float | None = None  # an open objective's output embeddings, at the last eval
        self.progress: Callable[[str, int, int], None] | None = None  # (split, batches done, of) for mode=eval

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        self.model.eval()
        # only rank 0 writes the summary the measure goes into
        keep_logits = self.classifies and self.dist.is_main
        loss, accuracy, parts, measured = self._pass(self.batches, keep_logits=keep_logits, measure=True)
        result = {VAL_LOSS: loss, **{VAL_LOSS_PART + name: value for name, value in parts.items()},
                  **self._named(VAL_PREFIX, loss, accuracy, measured)}
        self.last_parts = parts
        if self.embedding_rank is not None:  # this rank's eval rows: a measure of the output's shape, not a mean
            result[VAL_EFFECTIVE_RANK] = self.embedding_rank
        if self.train_batches is not None:
            result[VAL_LOSS_ON_TRAIN] = self._pass(self.train_batches)[0]
        self.model.train()
        return result

    @torch.no_grad()
    def test(self, batches: EvalBatches) -> dict[str, float]:
        """The same measure over a test split's batches (mode=eval), named as test metrics."""
        self.model.eval()
        loss, accuracy, parts, measured = self._pass(batches, measure=True)
        self.model.train()
        return {TEST_LOSS: loss, **{TEST_LOSS_PART + name: value for name, value in parts.items()},
                **self._named(TEST_PREFIX, loss, accuracy, measured)}

    def _named(self, prefix: str, loss: float, accuracy: float, measured: dict[str, float]) -> dict[str, float]:
        """A pass's accuracy, perplexity and metrics under `prefix` (val/, test/)."""
        named = {prefix + name: value for name, value in measured.items()}
        if self.classifies:
            named[prefix + VAL_ACCURACY.removeprefix(VAL_PREFIX)] = accuracy
        if self.counts_tokens:
            named[prefix + VAL_PERPLEXITY.removeprefix(VAL_PREFIX)] = perplexity(loss)
        return named

    @property
    def logged(self) -> dict[str, str | None]:
        """What each eval logs (name -> which way is better; None: not known): what a monitor or a
        sweep's objective may follow."""
        names: dict[str, str | None] = {VAL_LOSS: "min"}
        if self.classifies:
            names[VAL_ACCURACY] = "max"
        if self.counts_tokens:
            names[VAL_PERPLEXITY] = "min"
        parts = self.open_objective.part_names if self.open_objective is not None else ()
        names.update({VAL_LOSS_PART + name: "min" for name in parts})
        names.update({VAL_PREFIX + name: mode for name, mode in self.metrics.modes.items()})
        return names

    @property
    def classifies(self) -> bool:
        """Accuracy is measured: class logits under the built-in loss."""
        return self.meta.task == "classification" and self.open_objective is None

    @property
    def counts_tokens(self) -> bool:
        """Perplexity is measured: token cross-entropy under the built-in loss."""
        return self.meta.task == "lm" and self.open_objective is None

    def _pass(self, batches: EvalBatches, keep_logits: bool = False, measure: bool = False
              ) -> tuple[float, float, dict[str, float], dict[str, float]]:
        """(mean loss, accuracy) of the model as it is, over one fixed set of micro-batches; with
        `keep_logits`, how many directions the first OUTPUT_ROWS samples' logits span is kept for
        the summary (a capacity limit shows there). The third item: the open objective's parts; the
        fourth, with `measure`, every metric's value over the whole pass."""
        metrics = self.metrics if measure else EvalMetrics([])
        metrics.reset()
        if self.open_objective is not None:
            return (*self._open_pass(batches, self.open_objective, metrics), metrics.compute())
        totals = torch.zeros(3, device=self.device)  # loss * n, correct, n
        kept: list[torch.Tensor] = []
        for i, (x, y) in enumerate(batches, 1):
            self._report(batches, i)
            x, y = x.to(self.device), y.to(self.device)
            with self.precision.autocast():
                out = self.pick_output(self.model(x))
            if keep_logits:
                keep_rows(kept, out)
            counted = counted_targets(y, self.meta.ignore_index)
            n = counted.sum().float()
            correct = ((out.argmax(-1) == y) & counted).sum() if self.meta.task == "classification" else n * 0
            totals += torch.stack([self.loss_fn(out, y) * n, correct, n])
            metrics.update(out, (x, y), n)
        loss_n, correct, n = all_reduce_mean(totals, self.dist).tolist()
        if kept:
            self.output_directions = output_directions(torch.cat(kept)[:OUTPUT_ROWS])
        measured = metrics.compute()
        return (loss_n / n, correct / n, {}, measured) if n else (math.nan, math.nan, {}, measured)  # no target counted

    def _open_pass(self, batches: EvalBatches, objective: OpenObjective,
                   metrics: EvalMetrics) -> tuple[float, float, dict[str, float]]:
        """The mean loss and parts over every item: a counting objective's sums over its counts, or
        each batch's means weighted by its samples (a last partial batch weighs less)."""
        totals, names, kept = None, [], []
        for i, (batch, _) in enumerate(batches, 1):
            self._report(batches, i)
            batch = to_device(batch, self.device)
            with self.precision.autocast():
                output, scored = objective.scored_output(self.model, batch)
            rows = embedding_rows(output)
            if rows is not None:
                keep_rows(kept, rows)
            samples = torch.tensor(float(batch_size(batch)), device=self.device)
            metrics.update(output, batch, samples)
            if scored.count is not None:
                n, weight = scored.count.to(self.device, torch.float32), 1.0
            else:
                n = weight = samples
            names = list(scored.parts)
            row = torch.stack([scored.loss.detach().float() * weight,
                               *(value.to(self.device).float() * weight for value in scored.parts.values()), n])
            totals = row if totals is None else totals + row
        if totals is None:
            return math.nan, math.nan, {}
        *sums, n = all_reduce_mean(totals, self.dist).tolist()
        if not n:
            return math.nan, math.nan, {}
        self.embedding_rank = effective_rank(torch.cat(kept)[:OUTPUT_ROWS]) if kept else None
        return sums[0] / n, math.nan, {name: value / n for name, value in zip(names, sums[1:])}

    def _report(self, batches: EvalBatches, done: int) -> None:
        if self.progress is not None:
            self.progress(batches.split, done, len(batches))

    def summary(self) -> dict[str, Any]:
        """With an objective's `prior` part, the rules that judge a loss against the prior can run."""
        best_constant = self.last_parts.get(PRIOR_PART)  # the loss of the objective's best constant prediction
        prior = {} if best_constant is None else {"prior_loss": best_constant, "val_prior_loss": best_constant}
        return {"output_directions": self.output_directions, **self.prior, **prior}

    def close(self) -> None:
        self.batches.close()
        if self.train_batches is not None:
            self.train_batches.close()
