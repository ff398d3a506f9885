"""Where metrics go: one Tracker fans each call out to its sinks (harness/sinks/): metrics.jsonl,
the console, the in-memory history live diagnosis reads, and the `logger` option's sink
(TensorBoard by default). Only rank 0 builds one."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from harness.errors import ConfigError
from harness.sinks import SINKS
from harness.sinks.console import ConsoleSink
from harness.sinks.jsonl import JsonlSink, read_metrics
from harness.sinks.memory import MemorySink

LOGGERS = (*SINKS, "none")
__all__ = ["LOGGERS", "Tracker", "finite_or_none", "read_metrics", "validate_logger_config"]


def validate_logger_config(cfg: DictConfig) -> None:
    if cfg.get("name") not in LOGGERS:
        raise ConfigError("logger", cfg.get("name"), f"one of {list(LOGGERS)}")


class Tracker:
    def __init__(self, run_dir: Path, logger: str, max_steps: int, resume_step: int = 0, console: bool = True) -> None:
        self.history = MemorySink(run_dir, resume_step)
        self.sinks: list[Any] = [JsonlSink(run_dir, resume_step), self.history]
        if logger in SINKS:
            self.sinks.append(SINKS[logger](run_dir, resume_step))
        if console:
            self.sinks.append(ConsoleSink(run_dir, max_steps, start=resume_step))

    def _each(self, method: str, *args: Any) -> None:
        for sink in self.sinks:
            call = getattr(sink, method, None)
            if call is not None:
                call(*args)

    def log(self, step: int, scalars: dict[str, float], kind: str = "train") -> None:
        self._each("log", step, scalars, kind)

    def histograms(self, step: int, tensors: dict[str, Any]) -> None:
        self._each("histograms", step, tensors)

    def text(self, tag: str, message: str, step: int) -> None:
        self._each("text", tag, message, step)

    def close(self) -> None:
        self._each("close")


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/Inf; summary fields use null for them."""
    return value if value is not None and math.isfinite(value) else None
