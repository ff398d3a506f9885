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
    """Built with the trainer; writes nothing until `open`, once the run dir is known to be used."""

    def __init__(self, run_dir: Path, logger: str, max_steps: int, console: bool = True) -> None:
        self.run_dir, self.logger, self.max_steps, self.console = run_dir, logger, max_steps, console
        self.sinks: list[Any] = []
        self.history: MemorySink | None = None

    def open(self, resume_step: int = 0) -> None:
        """Start every sink at `resume_step` (a resumed run drops what was logged after it)."""
        self.history = MemorySink(self.run_dir, resume_step)
        self.sinks = [JsonlSink(self.run_dir, resume_step), self.history]
        if self.logger in SINKS:
            self.sinks.append(SINKS[self.logger](self.run_dir, resume_step))
        if self.console:
            self.sinks.append(ConsoleSink(self.run_dir, self.max_steps, start=resume_step))

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
