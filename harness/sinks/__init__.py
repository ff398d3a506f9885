"""Where metrics go. Every sink takes the same calls (`log`, `histograms`, `text`, `close`; any
may be left out) and the Tracker fans each one out. The JSONL file, the console and the
in-memory history are always on; `logger=` picks the rest from SINKS, so a new tracker is one
file here plus a config option in conf/logger/."""
from __future__ import annotations

from harness.sinks.tensorboard import TensorBoardSink

SINKS = {"tensorboard": TensorBoardSink}
