"""What metrics cost an eval, and what they hold in memory as the split grows.

1. Per-eval time: the same model and validation split evaluated with no metric, with torchmetrics'
   macro F1, and with F1 plus two function metrics, in interleaved rounds; medians and their ratios
   to the eval without metrics.
2. Memory against the split's size: the bytes each metric's state holds after a pass over a split,
   and over one 10x larger. A metric whose state is counts (F1, a function's sum and count) stays
   flat; one that keeps every prediction (torchmetrics' exact AUROC, thresholds=None) grows with the
   split, and is shown for contrast (its binned form, thresholds=N, is flat).

    python -m bench.metrics
    python -m bench.metrics --rounds 10 --samples 4000
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.data import TensorDataset

from bench.overhead import make_run
from harness.core.distributed import DistInfo
from harness.training.metrics.measure import EvalMetrics, FunctionMetric, ObjectMetric, logits_and_targets

LABELS = 5


def tags(n_train: int = 1024, n_val: int = 2000):
    """Five yes/no tags per sample, each a linear rule of 32 features (the benchmark's data factory)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n_train + n_val, 32, generator=g)
    y = (x @ torch.randn(32, LABELS, generator=g) > 0.5).float()
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[n_train:], y[n_train:])


def agreement(output: torch.Tensor, batch) -> torch.Tensor:
    return ((output > 0) == (batch[1] > 0.5)).float().mean()


def recall(output: torch.Tensor, batch) -> dict[str, torch.Tensor]:
    positive = batch[1] > 0.5
    return {"sum": ((output > 0) & positive).sum(), "count": positive.sum()}


RUN = ["model=mlp", "data=custom", "data._target_=bench.metrics.tags", "data.task=regression", "loss.function=bce",
       "model.width=256", "model.depth=3", "batch_size=64"]
F1 = ["+metrics.f1._target_=torchmetrics.classification.MultilabelF1Score", f"+metrics.f1.num_labels={LABELS}"]
FUNCTIONS = ["+metrics.agree._target_=bench.metrics.agreement", "+metrics.agree.higher_is_better=true",
             "+metrics.found._target_=bench.metrics.recall", "+metrics.found.higher_is_better=true"]


def eval_times(samples: int, rounds: int) -> None:
    whole = f"trainer.eval_batches={samples // 64 + 1}"
    variants = {"no metric (label accuracy only)": [], "macro F1": F1, "macro F1 + 2 functions": [*F1, *FUNCTIONS]}
    tmp = Path(tempfile.mkdtemp())
    built = {name: make_run([*RUN, f"+data.n_val={samples}", whole, *extra], tmp / str(i))
             for i, (name, extra) in enumerate(variants.items())}
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in built.items():
            start = time.perf_counter()
            run.evaluator.evaluate()
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["no metric (label accuracy only)"])
    print(f"per-eval time over {samples} validation samples, median of {rounds} interleaved rounds "
          f"({torch.get_num_threads()} threads):")
    for name, measured in times.items():
        median = statistics.median(measured)
        print(f"  {name:34s} {median * 1e3:8.1f} ms   {median / base:5.3f}x")
    for run in built.values():
        run.close()


def state_bytes(metric: EvalMetrics) -> dict[str, int]:
    """Bytes each metric's state holds now (tensors and lists of tensors)."""
    held = {}
    for m in metric.metrics:
        if isinstance(m, FunctionMetric):
            held[m.name] = m.total.element_size() * m.total.numel()
            continue
        total = 0
        for name in m.metric._defaults:  # torchmetrics: every registered state
            value = getattr(m.metric, name)
            for t in value if isinstance(value, list) else [value]:
                total += t.element_size() * t.numel()
        held[m.name] = total
    return held


def memory(samples: int) -> None:
    from torchmetrics.classification import MultilabelAUROC, MultilabelF1Score

    def fresh() -> EvalMetrics:
        pick = logits_and_targets(False)
        cpu, dist = torch.device("cpu"), DistInfo()
        return EvalMetrics([
            ObjectMetric("f1", MultilabelF1Score(num_labels=LABELS), pick, "max", "metrics.f1", "f1"),
            FunctionMetric("found", recall, {}, "max", cpu, dist, "metrics.found", "found"),
            ObjectMetric("auroc_binned", MultilabelAUROC(num_labels=LABELS, thresholds=100), pick, "max", "", ""),
            ObjectMetric("auroc_exact", MultilabelAUROC(num_labels=LABELS), pick, "max", "", "")])

    print("\nmetric state after one pass (bytes), against the split's size:")
    held = {}
    for n in (samples, 10 * samples):
        metrics, g = fresh(), torch.Generator().manual_seed(0)
        for start in range(0, n, 64):
            size = min(64, n - start)
            out, y = torch.randn(size, LABELS, generator=g), (torch.rand(size, LABELS, generator=g) > 0.5).long()
            metrics.update(out, (None, y), torch.tensor(float(size)))
        held[n] = state_bytes(metrics)
    for name in held[samples]:
        small, large = held[samples][name], held[10 * samples][name]
        print(f"  {name:14s} {small:10d} at {samples:6d} samples {large:10d} at {10 * samples:6d}   "
              f"{large / small:6.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--samples", type=int, default=2000)
    args = parser.parse_args()
    eval_times(args.samples, args.rounds)
    memory(args.samples)


if __name__ == "__main__":
    main()
