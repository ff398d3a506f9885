"""The console: a rich progress bar on a terminal, plain log lines otherwise (CI, files, pipes);
events print as warnings."""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from harness.core.metric_names import (GRAD_NORM_PRECLIP, PERF_SAMPLES, PERF_STEP_MS, PERF_TOKENS, TRAIN_LOSS,
                                       TRAIN_LOSS_PART, TRAIN_LR, TRAIN_SKIPPED, VAL_ACCURACY, VAL_EFFECTIVE_RANK,
                                       VAL_LOSS, VAL_LOSS_ON_TRAIN, VAL_LOSS_PART, VAL_PREFIX)
from harness.logger.base import Sink

if TYPE_CHECKING:
    from rich.progress import Progress

log = logging.getLogger("harness")


def shown_path(path: Path) -> Path:
    """`outputs/...` as the user typed it: relative to the working directory when inside it
    (and not the directory itself, as under hydra.job.chdir=true), else absolute."""
    path, cwd = path.resolve(), Path.cwd()
    return path.relative_to(cwd) if path != cwd and path.is_relative_to(cwd) else path


def _fmt(scalars: dict[str, float], key: str, spec: str) -> str | None:
    value = scalars.get(key)
    return None if value is None else format(value, spec)


def loss_text(value: float) -> str:
    """Four decimals where a loss usually lives; a blown-up or tiny one in scientific notation
    (520660758855335673856.0000 would take the whole line)."""
    return f"{value:.4f}" if 1e-3 <= abs(value) < 1e5 or value == 0 else f"{value:.3e}"


def rate_text(value: float) -> str:
    """12400 -> 12.4k: a throughput at a glance."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def _parts(scalars: dict[str, float], prefix: str) -> str:
    """An objective's parts after its loss: ` (recon 34.2961, kl 5.2512)`."""
    named = [f"{name[len(prefix):]} {loss_text(value)}" for name, value in scalars.items() if name.startswith(prefix)]
    return f" ({', '.join(named)})" if named else ""


def _fields(scalars: dict[str, float]) -> list[str]:
    """The train figures, the ones that matter most first: loss, LR, throughput, then gnorm, ms/step."""
    rate_key = PERF_TOKENS if PERF_TOKENS in scalars else PERF_SAMPLES
    loss = [] if TRAIN_LOSS not in scalars else [f"loss {loss_text(scalars[TRAIN_LOSS])}"]
    parts = [text + _parts(scalars, TRAIN_LOSS_PART) for text in loss]
    parts += [f"lr {text}" for text in [_fmt(scalars, TRAIN_LR, ".2e")] if text]
    if rate_key in scalars:
        parts.append(f"{rate_text(scalars[rate_key])} {rate_key.split('/')[1].replace('_per_s', '/s')}")
    parts += [f"gnorm {text}" for text in [_fmt(scalars, GRAD_NORM_PRECLIP, ".3g")] if text]
    parts += [f"{text} ms/step" for text in [_fmt(scalars, PERF_STEP_MS, ".1f")] if text]
    if scalars.get(TRAIN_SKIPPED):
        parts.append(f"skipped {int(scalars[TRAIN_SKIPPED])}")
    return parts


def console_line(step: int, max_steps: int, scalars: dict[str, float], kind: str) -> str:
    if kind == "eval":
        parts = [f"val loss {loss_text(scalars[VAL_LOSS])}{_parts(scalars, VAL_LOSS_PART)}"]
        if VAL_ACCURACY in scalars:
            parts.append(f"acc {scalars[VAL_ACCURACY]:.3f}")
        parts += [f"{name.removeprefix(VAL_PREFIX)} {value:.4g}" for name, value in scalars.items()
                  if name.startswith(VAL_PREFIX) and not name.startswith(VAL_LOSS_PART)
                  and name not in (VAL_LOSS, VAL_ACCURACY, VAL_LOSS_ON_TRAIN, VAL_EFFECTIVE_RANK)]
    else:
        parts = _fields(scalars)
    return f"step {step}/{max_steps} | " + " | ".join(parts)


class ConsoleSink(Sink):
    """A rich progress bar on a terminal; plain log lines otherwise (CI, files, pipes).

    While the bar is live, the console log handlers write through rich's stdout/stderr proxies,
    so a log line prints above the bar instead of being glued onto its line."""

    def __init__(self, run_dir: Path, total: int, start: int) -> None:
        log.info("run dir: %s", shown_path(run_dir))
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
            desc = "  ".join(_fields(scalars)) if kind == "train" else self.bar.tasks[0].description
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
    """Bar, step count and ETA keep ~30 columns; the figures take what is left, loss, LR and
    throughput first, cut with an ellipsis: an 80-column terminal shows the four that matter."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Column

    metrics = TextColumn("{task.description}", table_column=Column(no_wrap=True, overflow="ellipsis", ratio=1))
    return Progress(BarColumn(bar_width=10), MofNCompleteColumn(), TimeRemainingColumn(), metrics, expand=True,
                    transient=False)


def _reroute_console_handlers(proxies: dict[int, TextIO]) -> list[tuple[logging.StreamHandler, TextIO]]:
    """Point every root handler that writes to the real stdout/stderr (Hydra's console handler)
    at rich's proxy for that stream; returns (handler, original stream) pairs to undo it."""
    rerouted = []
    for handler in logging.getLogger().handlers:
        stream = getattr(handler, "stream", None)
        if isinstance(handler, logging.StreamHandler) and id(stream) in proxies:
            rerouted.append((handler, handler.setStream(proxies[id(stream)])))
    return rerouted
