"""Metrics measured at each eval besides the loss, and the one monitored value that picks best.pt,
stops early and reports to a sweep's pruner.

- spec.py: the `metrics` config node (`+metrics.NAME._target_=...`), checked;
- measure.py: each metric's state, updated per batch, reduced over ranks, computed once per eval;
- builtin.py: what built-in tasks log without config (label accuracy, perplexity);
- monitored.py: `trainer.monitor` / `trainer.monitor_mode` and the names a run logs.
"""
from __future__ import annotations

import torch

from harness.core.distributed import DistInfo
from harness.training.metrics.builtin import task_metrics
from harness.training.metrics.measure import EvalMetrics, build_metric
from harness.training.metrics.spec import MetricSpec


def build_eval_metrics(specs: dict[str, MetricSpec], *, task: str, loss_function: str | None, open_objective: bool,
                       device: torch.device, dist: DistInfo) -> EvalMetrics:
    """The built-in task's metrics, then the configured ones, in the config's order."""
    configured = [build_metric(spec, open_objective=open_objective, flatten=task == "lm", device=device, dist=dist)
                  for spec in specs.values()]
    return EvalMetrics([*task_metrics(task, loss_function, open_objective, device, dist), *configured])
