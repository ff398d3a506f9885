"""The console: a rich progress bar on a terminal, plain log lines otherwise (CI, files, pipes);
events print as warnings."""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.metric_names import (GRAD_NORM_PRECLIP, PERF_SAMPLES, PERF_STEP_MS, PERF_TOKENS, TRAIN_LOSS, TRAIN_LR,
                                  TRAIN_SKIPPED, VAL_ACCURACY, VAL_LOSS)

if TYPE_CHECKING:
    from rich.progress import Progress

log = logging.getLogger("harness")


def _shown(path: Path) -> Path:
    """`outputs/...` as the user typed it: relative to the working directory when inside it
    (and not the directory itself, as under hydra.job.chdir=true), else absolute."""
    path, cwd = path.resolve(), Path.cwd()
    return path.relative_to(cwd) if path != cwd and path.is_relative_to(cwd) else path


def _fmt(scalars: dict[str, float], key: str, spec: str) -> str | None:
    value = scalars.get(key)
    return None if value is None else format(value, spec)


def console_line(step: int, max_steps: int, scalars: dict[str, float], kind: str) -> str:
    if kind == "eval":
        parts = [f"val loss {scalars[VAL_LOSS]:.4f}"]
        if VAL_ACCURACY in scalars:
            parts.append(f"acc {scalars[VAL_ACCURACY]:.3f}")
    else:
        rate_key = PERF_TOKENS if PERF_TOKENS in scalars else PERF_SAMPLES
        fields = [("loss", TRAIN_LOSS, ".4f"), ("lr", TRAIN_LR, ".2e"),
                  ("gnorm", GRAD_NORM_PRECLIP, ".3g"),
                  (rate_key.split("/")[1].replace("_per_s", "/s"), rate_key, ".4g"),
                  ("ms/step", PERF_STEP_MS, ".1f")]
        parts = [f"{name} {text}" for name, key, spec in fields if (text := _fmt(scalars, key, spec)) is not None]
        if scalars.get(TRAIN_SKIPPED):
            parts.append(f"skipped {int(scalars[TRAIN_SKIPPED])}")
    return f"step {step}/{max_steps} | " + " | ".join(parts)


class ConsoleSink:
    """A rich progress bar on a terminal; plain log lines otherwise (CI, files, pipes).

    While the bar is live, the console log handlers write through rich's stdout/stderr proxies,
    so a log line prints above the bar instead of being glued onto its line."""

    def __init__(self, run_dir: Path, total: int, start: int) -> None:
        log.info("run dir: %s", _shown(run_dir))
        self.total = total
        self.bar = None
        self._rerouted: list[tuple[logging.StreamHandler, TextIO]] = []
        if sys.stdout.isatty():
            self.bar = _progress_bar()
            self.task = self.bar.add_task("", total=total, completed=start)
            real_out, real_err = sys.stdout, sys.stderr
            self.bar.start()  # swaps sys.stdout/stderr for proxies that print above the bar
            proxies = {id(real): proxy for real, proxy in ((real_out, sys.stdout), (real_err, sys.stderr))
                       if real.isatty()}  # a handler writing to a file or pipe keeps writing there
            self._rerouted = _reroute_console_handlers(proxies)

    def log(self, step: int, scalars: dict[str, float], kind: str) -> None:
        if kind not in ("train", "eval"):  # a callback's own metrics: in the files, not on the console line
            return
        line = console_line(step, self.total, scalars, kind)
        if self.bar is None or kind == "eval":
            log.info(line)
        if self.bar is not None:
            desc = line.split(" | ", 1)[1] if kind == "train" else self.bar.tasks[0].description
            self.bar.update(self.task, completed=step, description=desc)

    def text(self, tag: str, message: str, step: int) -> None:
        log.warning(message)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            for handler, stream in self._rerouted:
                handler.setStream(stream)
            self._rerouted = []


def _progress_bar() -> Progress:
    """Step count, percentage and ETA keep their width; the metrics text takes what is left and
    is cut with an ellipsis, so an 80-column terminal still shows where the run is."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn,
                               TimeRemainingColumn)
    from rich.table import Column

    metrics = TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1))
    return Progress(TextColumn("train"), BarColumn(bar_width=20), MofNCompleteColumn(), TaskProgressColumn(),
                    TimeRemainingColumn(), metrics, expand=True, transient=False)


def _reroute_console_handlers(proxies: dict[int, TextIO]) -> list[tuple[logging.StreamHandler, TextIO]]:
    """Point every root handler that writes to the real stdout/stderr (Hydra's console handler)
    at rich's proxy for that stream; returns (handler, original stream) pairs to undo it."""
    rerouted = []
    for handler in logging.getLogger().handlers:
        stream = getattr(handler, "stream", None)
        if isinstance(handler, logging.StreamHandler) and id(stream) in proxies:
            rerouted.append((handler, handler.setStream(proxies[id(stream)])))
    return rerouted
