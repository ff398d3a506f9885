"""RUN_DIR/metrics.jsonl: one JSON object per logged step and per eval; the diagnosis and the
tests read it. On resume the rows after the checkpoint's step are dropped, so the history of a
resumed run equals that of an uninterrupted one."""
from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from harness.state.files import atomic_write
from harness.core.errors import write_error
from harness.logger.base import Sink

METRICS_FILE = "metrics.jsonl"


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """The rows; a last line cut short (a kill or a full disk mid-write) is left out."""
    path = Path(run_dir) / METRICS_FILE
    if not path.exists():
        return []
    lines = [line for line in path.read_text().splitlines() if line.strip()]
    rows = [json.loads(line) for line in lines[:-1]]
    with contextlib.suppress(ValueError):
        rows.extend(json.loads(line) for line in lines[-1:])
    return rows


class JsonlSink(Sink):
    def __init__(self, run_dir: Path, kept: list[dict[str, Any]]) -> None:
        """`kept`: the rows of an earlier invocation up to the resumed step; the file holds only them
        (replaced atomically: a kill while it is rewritten loses no history)."""
        self.path = run_dir / METRICS_FILE
        atomic_write(self.path, lambda f: f.write("".join(json.dumps(r) + "\n" for r in kept).encode()))
        self.file = self.path.open("a")

    def log(self, step: int, scalars: dict[str, float], kind: str) -> None:
        try:
            self.file.write(json.dumps({"step": step, "kind": kind, **scalars}) + "\n")
            self.file.flush()
        except OSError as err:
            raise write_error(self.path, err) from None

    def close(self) -> None:
        self.file.close()
