"""A run directory's results are never overwritten by accident, and nothing half-written survives in it."""
from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

from harness.core.errors import ConfigError
from harness.state.files import remove_path

CKPT_DIR = "checkpoints"
BEST_LINK = "best.dcp"  # a sharded run's best checkpoint: a link to its best_NNNNNNNN.dcp directory
# What a run leaves besides Hydra's own .hydra/ and train.log.
RESULTS = (CKPT_DIR, "attempts", "summary.json", "metrics.jsonl", "config.yaml", "tb", "report.md", "plots",
           "doctor.md", "doctor.json", "lr_find.json", "lr_find.png", "eval.json")


def results_in(run_dir: Path) -> list[str]:
    """The results of an earlier run found in `run_dir` (an empty checkpoints/ does not count)."""
    found = []
    for name in RESULTS:
        path = run_dir / name
        if path.is_file() or (path.is_dir() and any(path.iterdir())):
            found.append(name)
    return found


def claim_run_dir(run_dir: Path, resume: object, overwrite: bool) -> None:
    """Refuse to start over an earlier run unless continuing it (resume=auto) or told to replace it."""
    found = results_in(run_dir)
    if not found or resume == "auto":
        return
    if not overwrite:
        raise ConfigError("hydra.run.dir", str(run_dir),
                          f"a directory without an earlier run's results (it holds {', '.join(found)}): continue "
                          f"that run with resume=auto, replace it with overwrite=true, or choose another hydra.run.dir")
    for name in found:
        path = run_dir / name
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def remove_stale_temp_files(run_dir: Path) -> list[Path]:
    """What a checkpoint write that a kill interrupted left: temporary files and directories
    (files.atomic_write's and sharded_checkpoint's names), and a sharded best checkpoint
    written but never linked as best.dcp."""
    folder = run_dir / CKPT_DIR
    link = folder / BEST_LINK
    current = os.readlink(link) if link.is_symlink() else None
    stale = sorted([*folder.glob(".*.tmp"), *(p for p in folder.glob("best_*.dcp") if p.name != current)])
    for path in stale:
        remove_path(path)
    return stale


def sweep_value(objective: Any) -> Any:
    """summary.json's objective as a sweep takes it: a missing value (no eval finished) is NaN."""
    if isinstance(objective, list):
        return [math.nan if v is None else v for v in objective]
    return math.nan if objective is None else objective


def stored_objective(run_dir: Path) -> Any:
    """The objective a finished run's summary.json holds, as a sweep takes it (NaN without one)."""
    summary = run_dir / "summary.json"
    return sweep_value(json.loads(summary.read_text()).get("objective") if summary.is_file() else None)
