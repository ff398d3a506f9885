"""Where metrics go: TensorBoard (logger=tensorboard), RUN_DIR/metrics.jsonl, and the console.

metrics.jsonl holds one JSON object per logged step and per eval; the diagnosis and the
tests read it. On resume both sinks drop what was logged after the checkpoint's step, so the
history of a resumed run equals that of an uninterrupted one.
"""
from __future__ import annotations

import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from harness.errors import ConfigError

LOGGERS = ("tensorboard", "none")
log = logging.getLogger("harness")


def validate_logger_config(cfg: DictConfig) -> None:
    if cfg.get("name") not in LOGGERS:
        raise ConfigError("logger", cfg.get("name"), f"one of {list(LOGGERS)}")


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Tracker:
    """Fan one dict of scalars out to every sink. Only rank 0 builds one."""

    def __init__(self, run_dir: Path, logger: str, max_steps: int, resume_step: int = 0) -> None:
        self.run_dir, self.max_steps = run_dir, max_steps
        self.jsonl = run_dir / "metrics.jsonl"
        self._truncate_jsonl(resume_step)
        self._jsonl_file = self.jsonl.open("a")
        self.tb = None
        if logger == "tensorboard":
            from torch.utils.tensorboard import SummaryWriter

            # purge_step hides events a crashed run wrote after its last checkpoint
            self.tb = SummaryWriter(str(run_dir / "tb"), purge_step=resume_step + 1 if resume_step else None)
        self.progress = _Progress(max_steps, start=resume_step)

    def _truncate_jsonl(self, resume_step: int) -> None:
        if not self.jsonl.exists():
            return
        kept = [r for r in read_metrics(self.run_dir) if r["step"] <= resume_step]
        self.jsonl.write_text("".join(json.dumps(r) + "\n" for r in kept))

    def log(self, step: int, scalars: dict[str, float], kind: str = "train") -> None:
        self._jsonl_file.write(json.dumps({"step": step, "kind": kind, **scalars}) + "\n")
        self._jsonl_file.flush()
        if self.tb is not None:
            for tag, value in scalars.items():
                self.tb.add_scalar(tag, value, step)
        self.progress.update(step, scalars, kind)

    def histograms(self, step: int, tensors: dict[str, Any]) -> None:
        if self.tb is not None:
            for tag, values in tensors.items():
                self.tb.add_histogram(tag, values.float().cpu(), step)

    def text(self, tag: str, message: str, step: int) -> None:
        log.warning(message)
        if self.tb is not None:
            self.tb.add_text(tag, message, step)

    def close(self) -> None:
        self.progress.close()
        self._jsonl_file.close()
        if self.tb is not None:
            self.tb.close()


def _fmt(scalars: dict[str, float], key: str, spec: str) -> str | None:
    value = scalars.get(key)
    return None if value is None else format(value, spec)


def console_line(step: int, max_steps: int, scalars: dict[str, float], kind: str) -> str:
    if kind == "eval":
        parts = [f"val loss {scalars['val/loss']:.4f}"]
        if "val/accuracy" in scalars:
            parts.append(f"acc {scalars['val/accuracy']:.3f}")
    else:
        rate_key = "perf/tokens_per_s" if "perf/tokens_per_s" in scalars else "perf/samples_per_s"
        fields = [("loss", "train/loss", ".4f"), ("lr", "train/lr", ".2e"),
                  ("gnorm", "grad/norm_preclip", ".3g"), (rate_key.split("/")[1].replace("_per_s", "/s"), rate_key, ".4g"),
                  ("ms/step", "perf/step_time_ms", ".1f")]
        parts = [f"{name} {text}" for name, key, spec in fields if (text := _fmt(scalars, key, spec)) is not None]
        if scalars.get("train/skipped_steps"):
            parts.append(f"skipped {int(scalars['train/skipped_steps'])}")
    return f"step {step}/{max_steps} | " + " | ".join(parts)


class _Progress:
    """A rich progress bar on a terminal; plain log lines otherwise (CI, files, pipes)."""

    def __init__(self, total: int, start: int) -> None:
        self.total = total
        self.bar = None
        if sys.stdout.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), TextColumn("{task.description}"), transient=False)
            self.task = self.bar.add_task("", total=total, completed=start)
            self.bar.start()

    def update(self, step: int, scalars: dict[str, float], kind: str) -> None:
        line = console_line(step, self.total, scalars, kind)
        if self.bar is None or kind == "eval":
            log.info(line)
        if self.bar is not None:
            desc = line.split(" | ", 1)[1] if kind == "train" else self.bar.tasks[0].description
            self.bar.update(self.task, completed=step, description=desc)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/Inf; summary fields use null for them."""
    return value if value is not None and math.isfinite(value) else None
