"""Where metrics go: one Tracker fans each call out to its sinks (harness/logger/): metrics.jsonl,
the console, the in-memory history live diagnosis reads, and the trackers the `logger` node
names (TensorBoard by default; several at once: logger=[tensorboard,mlflow]). Only rank 0
builds one. A tracker that fails (an unwritable store, a lost server) stops nothing: one warning,
and the other sinks keep writing."""
from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

from omegaconf import DictConfig

from harness.core.errors import ConfigError
from harness.logger import SINKS
from harness.logger.base import RunInfo, Sink
from harness.logger.console import ConsoleSink
from harness.logger.jsonl import JsonlSink, read_metrics
from harness.logger.memory import MetricHistory
from harness.core.typed_config import read_typed

LOGGERS = (*SINKS, "none")
__all__ = ["LOGGERS", "Tracker", "finite_or_none", "logger_settings", "read_metrics"]
log = logging.getLogger("harness")


def logger_settings(node: Mapping[str, Any] | DictConfig | None) -> dict[str, Any]:
    """The `logger` node as {tracker name: its typed settings}; a name nothing provides fails."""
    chosen = {}
    for name, settings in (node or {}).items():
        if name not in SINKS:
            raise ConfigError("logger", name, f"one of {list(LOGGERS)}, or several: logger=[tensorboard,mlflow]")
        schema = SINKS[name][1]
        chosen[name] = read_typed(settings, schema, f"logger.{name}") if schema is not None else None
    return chosen


class Tracker:
    """Built with the trainer; writes nothing until `open`, once the run dir is known to be used."""

    def __init__(self, info: RunInfo, loggers: dict[str, Any], max_steps: int, console: bool = True) -> None:
        self.info, self.loggers, self.max_steps, self.console = info, loggers, max_steps, console
        self.sinks: list[Sink] = []
        self.optional: dict[int, str] = {}  # id(sink) -> its logger name, for the sinks that may fail
        self.history: MetricHistory | None = None

    def open(self, resume_step: int = 0) -> None:
        """Start every sink at `resume_step` (a resumed run drops or skips what was logged after it)."""
        info = RunInfo(self.info.run_dir, self.info.config, resume_step, self.info.study, self.info.trial)
        kept = [r for r in read_metrics(info.run_dir) if r["step"] <= resume_step]  # the file is read once
        self.history = MetricHistory(kept)
        self.sinks = [JsonlSink(info.run_dir, kept), self.history]
        if self.console:
            self.sinks.append(ConsoleSink(info.run_dir, self.max_steps, start=resume_step))
        for name, settings in self.loggers.items():
            try:
                sink = SINKS[name][0](info, settings)
            except Exception as err:  # noqa: BLE001 - a tracker that cannot start must not stop training
                self._warn(name, err)
                continue
            self.sinks.append(sink)
            self.optional[id(sink)] = name

    def _warn(self, name: str, err: Exception) -> None:
        log.warning("logger %s failed (%s: %s); it stops writing, training and the other sinks go on",
                    name, type(err).__name__, " ".join(str(err).split())[:300])

    def _each(self, call: Callable[[Sink], None]) -> None:
        for sink in list(self.sinks):
            if id(sink) not in self.optional:
                call(sink)
                continue
            try:
                call(sink)
            except Exception as err:  # noqa: BLE001 - see `open`
                self._warn(self.optional.pop(id(sink)), err)
                self.sinks.remove(sink)

    def log(self, step: int, scalars: dict[str, float], kind: str = "train") -> None:
        self._each(lambda sink: sink.log(step, scalars, kind))

    def histograms(self, step: int, tensors: dict[str, Any]) -> None:
        self._each(lambda sink: sink.histograms(step, tensors))

    def text(self, tag: str, message: str, step: int) -> None:
        self._each(lambda sink: sink.text(tag, message, step))

    def finish(self, summary: dict[str, Any]) -> None:
        """The run is over and its files are written: trackers file them and the run's status."""
        self._each(lambda sink: sink.finish(summary))

    def close(self) -> None:
        self._each(lambda sink: sink.close())


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/Inf; summary fields use null for them."""
    return value if value is not None and math.isfinite(value) else None
