"""The run's metrics so far, in memory: what live diagnosis judges at each eval, without
re-reading metrics.jsonl (which grows with the run). A resumed run starts from the rows the
file keeps."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.sinks.jsonl import read_metrics


class MemorySink:
    def __init__(self, run_dir: Path, resume_step: int) -> None:
        self.train: list[dict[str, Any]] = []  # train rows, in step order
        self.evals: list[dict[str, Any]] = []
        self._key_order: dict[str, None] = {}  # train keys in first-logged order
        for row in read_metrics(run_dir):
            if row["step"] <= resume_step:
                self._add(row)

    @property
    def key_order(self) -> list[str]:
        return list(self._key_order)

    def log(self, step: int, scalars: dict[str, float], kind: str) -> None:
        self._add({"step": step, "kind": kind, **scalars})

    def _add(self, row: dict[str, Any]) -> None:
        if row.get("kind", "train") == "train":
            self.train.append(row)
            self._key_order.update(dict.fromkeys(row))
        elif row.get("kind") == "eval":
            self.evals.append(row)
