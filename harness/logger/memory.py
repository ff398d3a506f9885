"""A run's metric rows split the way the diagnosis reads them: train rows (with their keys in
first-logged order) and eval rows. As a sink it is the history live diagnosis judges at each
eval, without re-reading metrics.jsonl (which grows with the run); load_run builds one from the
file."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from harness.logger.base import Sink


class MetricHistory(Sink):
    def __init__(self, rows: Iterable[dict[str, Any]] = ()) -> None:
        self.train: list[dict[str, Any]] = []  # train rows, in step order
        self.evals: list[dict[str, Any]] = []
        self._key_order: dict[str, None] = {}  # train keys in first-logged order
        for row in rows:
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
