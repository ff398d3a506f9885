"""Turn a finished trial process (exit code + its summary.json) into the Optuna verdict.

Every way a trial can go wrong ends as FAIL with a one-line reason, never as an exception that
would end the sweep: a crash, a diverged or NaN run, a missing or malformed summary.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from optuna.trial import TrialState

from harness.core.validation import is_number
from harness.launch.runner import ProcessResult

SUMMARY_FILE = "summary.json"
# Hydra ends every crash report with this hint; the error itself is the line before it.
HYDRA_HINT = "Set the environment variable HYDRA_FULL_ERROR=1"
FAILED_STATUSES = ("diverged", "sick", "failed", "stopped")  # sick: diagnose.abort_on stopped it


@dataclass(frozen=True)
class Outcome:
    state: TrialState
    values: Optional[list[float]] = None
    reason: Optional[str] = None
    summary: dict[str, Any] = field(default_factory=dict)


def judge(result: ProcessResult, run_dir: Path, n_objectives: int) -> Outcome:
    if result.killed == "interrupted":
        return Outcome(TrialState.FAIL, reason="interrupted")
    if result.killed == "timeout":
        took = result.ended_at - result.started_at
        return Outcome(TrialState.FAIL, reason=f"timeout: killed after {took:.0f} s")
    summary = read_summary(run_dir)
    if result.exit_code != 0:
        why = (summary or {}).get("reason") or last_line(result.log_path) or "no output"
        return Outcome(TrialState.FAIL, reason=f"exit code {result.exit_code}: {why}",
                       summary=summary or {})
    if summary is None:
        return Outcome(TrialState.FAIL, reason=f"exit code 0 but no valid {SUMMARY_FILE} in the run dir")
    status = summary.get("status")
    if status == "pruned":
        return Outcome(TrialState.PRUNED, reason=summary.get("reason"), summary=summary)
    if status in FAILED_STATUSES:
        detail = summary.get("reason")
        return Outcome(TrialState.FAIL, reason=f"{status}: {detail}" if detail else status,
                       summary=summary)
    if status != "completed":
        return Outcome(TrialState.FAIL, reason=f"unknown status {status!r} in {SUMMARY_FILE}",
                       summary=summary)
    values, problem = _objective(summary.get("objective"), n_objectives)
    if problem:
        return Outcome(TrialState.FAIL, reason=problem, summary=summary)
    return Outcome(TrialState.COMPLETE, values=values, summary=summary)


def _objective(raw: Any, n_objectives: int) -> tuple[Optional[list[float]], Optional[str]]:
    values = raw if isinstance(raw, list) else [raw]
    if len(values) != n_objectives:
        return None, (f"objective has {len(values)} value(s) but hydra.sweeper.direction has "
                      f"{n_objectives}")
    if any(v is None for v in values):
        return None, "objective is null: the run produced no finite value"
    if any(not is_number(v) for v in values):
        return None, f"objective {raw!r} is not a number"
    if any(math.isnan(v) for v in values):
        return None, "objective is NaN"
    if any(math.isinf(v) for v in values):
        return None, "objective is infinite"
    return [float(v) for v in values], None


def read_summary(run_dir: Path) -> Optional[dict[str, Any]]:
    try:
        data = json.loads((run_dir / SUMMARY_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def last_line(path: Path, limit: int = 300) -> str:
    """Last non-empty line of a log: the one-line error a crashed app prints last."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 8192))
            tail = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in tail.splitlines()
             if ln.strip() and not ln.startswith(HYDRA_HINT)]
    return lines[-1][:limit] if lines else ""
