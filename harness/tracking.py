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
from typing import TYPE_CHECKING, Any, TextIO

from omegaconf import DictConfig

from harness.errors import ConfigError
from harness.metric_names import (GRAD_NORM_PRECLIP, PERF_SAMPLES, PERF_STEP_MS, PERF_TOKENS, TRAIN_LOSS, TRAIN_LR,
                                  TRAIN_SKIPPED, VAL_ACCURACY, VAL_LOSS)

if TYPE_CHECKING:
    from rich.progress import Progress

LOGGERS = ("tensorboard", "none")
log = logging.getLogger("harness")
# TensorBoard lists tag groups alphabetically and opens only the first two, so act_mean/ and
# grad_norm/ (one chart per layer) would open first and bury the run's vital signs. In
# TensorBoard only, every group but these gets TB_LATER_PREFIX, which sorts after every letter:
# grad/ and train/ open (grad norm, loss, lr), val/ is the next header. metrics.jsonl, which the
# diagnosis reads, keeps the plain keys.
TB_FIRST_GROUPS = ("grad", "train", "val")
TB_LATER_PREFIX = "~"
# The monitor's groups that hold one tag per parameter or module (grad_norm/fc1.weight, ...).
PER_TENSOR_GROUPS = ("grad_norm", "param_norm", "update_ratio", "grad_dead", "act_mean", "act_std", "act_dead",
                     "attn_entropy")


def validate_logger_config(cfg: DictConfig) -> None:
    if cfg.get("name") not in LOGGERS:
        raise ConfigError("logger", cfg.get("name"), f"one of {list(LOGGERS)}")


def tb_tag(key: str) -> str:
    """The TensorBoard tag of a metrics.jsonl key (see TB_FIRST_GROUPS)."""
    return key if key.split("/", 1)[0] in TB_FIRST_GROUPS else TB_LATER_PREFIX + key


def custom_scalars_layout() -> dict[str, dict[str, list]]:
    """TensorBoard's Custom Scalars tab: the run's vital signs on one page, then one chart per
    per-tensor statistic with every layer in it (the Scalars tab shows one chart per tensor).
    Entries are regexes matched from the start of a tag (group names and the prefix hold no
    regex metacharacters)."""
    overview = {"loss": ["Multiline", ["train/loss$", "val/loss$"]],
                "learning rate": ["Multiline", ["train/lr$"]],
                "gradient norm": ["Multiline", ["grad/norm_preclip$", "grad/norm_postclip$"]]}
    per_tensor = {group: ["Multiline", [tb_tag(f"{group}/")]] for group in PER_TENSOR_GROUPS}
    return {"overview": overview, "per tensor": per_tensor}


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
            self.tb.add_custom_scalars(custom_scalars_layout())
        log.info("run dir: %s", _shown(run_dir))
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
            for key, value in scalars.items():
                self.tb.add_scalar(tb_tag(key), value, step)
        self.progress.update(step, scalars, kind)

    def histograms(self, step: int, tensors: dict[str, Any]) -> None:
        if self.tb is not None:
            for tag, values in tensors.items():  # one per tensor: after the vital signs too
                self.tb.add_histogram(TB_LATER_PREFIX + tag, values.float().cpu(), step)

    def text(self, tag: str, message: str, step: int) -> None:
        log.warning(message)
        if self.tb is not None:
            self.tb.add_text(tag, message, step)

    def close(self) -> None:
        self.progress.close()
        self._jsonl_file.close()
        if self.tb is not None:
            self.tb.close()


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


class _Progress:
    """A rich progress bar on a terminal; plain log lines otherwise (CI, files, pipes).

    While the bar is live, the console log handlers write through rich's stdout/stderr proxies,
    so a log line prints above the bar instead of being glued onto its line."""

    def __init__(self, total: int, start: int) -> None:
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


def finite_or_none(value: float | None) -> float | None:
    """JSON has no NaN/Inf; summary fields use null for them."""
    return value if value is not None and math.isfinite(value) else None
