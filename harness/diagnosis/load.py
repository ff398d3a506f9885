"""Read a run directory (config.yaml, summary.json, metrics.jsonl) into arrays the rules share.

Only these three files are read, so a run can be diagnosed anywhere it is copied to; the
config and the summary may be missing (a crashed or foreign run) and every rule then does
without them.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from harness.training.schedule import warmup_steps
from harness.logger.jsonl import METRICS_FILE, read_metrics
from harness.logger.memory import MetricHistory


class MissingMetricsError(FileNotFoundError):
    """The directory holds no metrics.jsonl: not a training run (or one that never logged)."""


@dataclass(frozen=True)
class Series:
    """One logged metric: the steps where it was logged and its values (NaN/Inf kept)."""

    steps: np.ndarray
    values: np.ndarray

    def __len__(self) -> int:
        return len(self.values)

    def finite(self) -> Series:
        keep = np.isfinite(self.values)
        return Series(self.steps[keep], self.values[keep])

    def after_fraction(self, fraction: float) -> Series:
        """The points logged in the last (1 - fraction) of the series' step range."""
        if not len(self):
            return self
        cut = self.steps[0] + fraction * (self.steps[-1] - self.steps[0])
        keep = self.steps >= cut
        return Series(self.steps[keep], self.values[keep])


@dataclass
class RunData:
    """Everything the rules may read about one run: plain dicts and rows, no torch objects."""

    run_dir: Path
    config: dict[str, Any]  # config.yaml as nested dicts ({} when missing)
    summary: dict[str, Any]  # summary.json ({} when missing)
    train: list[dict[str, Any]]  # metrics.jsonl train rows, in step order
    evals: list[dict[str, Any]]  # metrics.jsonl eval rows
    key_order: list[str] = field(default_factory=list)  # train keys in first-logged order

    def cfg(self, dotted: str, default: Any = None) -> Any:
        """A config value by dotted key (`precision.loss_scaling`), or `default` when absent."""
        node: Any = self.config
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def series(self, key: str, kind: str = "train") -> Series:
        rows = [r for r in (self.train if kind == "train" else self.evals) if key in r]
        return Series(np.array([r["step"] for r in rows], dtype=np.int64),
                      np.array([_as_float(r[key]) for r in rows], dtype=np.float64))

    def keys(self, prefix: str) -> list[str]:
        """Logged train keys starting with `prefix`, in first-logged order (= the model's parameter order)."""
        return [k for k in self.key_order if k.startswith(prefix)]

    @property
    def events(self) -> list[dict[str, Any]]:
        return list(self.summary.get("events") or [])

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("kind") == kind]

    @property
    def max_steps(self) -> int | None:
        value = self.summary.get("max_steps", self.cfg("trainer.max_steps"))
        return int(value) if value is not None else None

    @property
    def summed_micro_batches(self) -> int | None:
        """`accum` when accum_reduction=sum adds up more than one micro-batch gradient (each update
        that many times too large), else None."""
        accum = self.cfg("accum", 1)
        summed = self.cfg("accum_reduction") == "sum" and isinstance(accum, int) and accum > 1
        return accum if summed else None

    @property
    def warmup(self) -> int | None:
        """Warmup length in steps (the schedule's own rule for a fractional `warmup`); None without a config."""
        schedule, max_steps = self.cfg("schedule"), self.max_steps
        if not isinstance(schedule, dict) or max_steps is None:
            return None
        return warmup_steps(schedule, max_steps)


def _as_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def load_run(run_dir: Path | str) -> RunData:
    run_dir = Path(run_dir)
    metrics = run_dir / METRICS_FILE
    if not metrics.is_file():
        raise MissingMetricsError(f"{run_dir} has no {METRICS_FILE}")
    history = MetricHistory(read_metrics(run_dir))
    return RunData(run_dir, read_config(run_dir), _read_json(run_dir / "summary.json"), history.train, history.evals,
                   history.key_order)


def read_config(run_dir: Path) -> dict[str, Any]:
    """config.yaml as nested dicts ({} when missing)."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        return {}
    container = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
    return container if isinstance(container, dict) else {}


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text()) if path.is_file() else {}
