"""Where metrics go. Every sink subclasses `harness.logger.base.Sink`, which declares the calls
(`log`, `histograms`, `text`, `finish`, `close`; only `log` must be defined), and the Tracker fans
each one out. The JSONL file, the console and
the in-memory history are always on; the `logger` node picks the rest from SINKS, so a new
tracker is one file here plus a file in conf/logger/ (several at once: logger=[tensorboard,mlflow])."""
from __future__ import annotations

from typing import Any

from harness.logger.mlflow import MLflowSettings, MLflowSink
from harness.logger.tensorboard import TensorBoardSink
from harness.logger.wandb import WandbSettings, WandbSink


SINKS: dict[str, tuple[Any, Any]] = {  # logger option -> (sink class, its settings dataclass or None)
    "tensorboard": (TensorBoardSink, None),
    "mlflow": (MLflowSink, MLflowSettings),
    "wandb": (WandbSink, WandbSettings),
}
