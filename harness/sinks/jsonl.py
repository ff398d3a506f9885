"""RUN_DIR/metrics.jsonl: one JSON object per logged step and per eval; the diagnosis and the
tests read it. On resume the rows after the checkpoint's step are dropped, so the history of a
resumed run equals that of an uninterrupted one."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

METRICS_FILE = "metrics.jsonl"


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class JsonlSink:
    def __init__(self, run_dir: Path, kept: list[dict[str, Any]]) -> None:
        """`kept`: the rows of an earlier invocation up to the resumed step; the file holds only them."""
        path = run_dir / METRICS_FILE
        path.write_text("".join(json.dumps(r) + "\n" for r in kept))
        self.file = path.open("a")

    def log(self, step: int, scalars: dict[str, float], kind: str) -> None:
        self.file.write(json.dumps({"step": step, "kind": kind, **scalars}) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()
