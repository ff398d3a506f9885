"""What a check finds, and the table row it becomes."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Status(str, Enum):
    PASS = "PASS"
    WARN = "WARN"  # works, but likely not what was meant
    FAIL = "FAIL"  # training this way wastes the run; `train.py` exits 1
    SKIP = "SKIP"  # the check does not apply (the reason is in `measured`)


@dataclass(frozen=True)
class Outcome:
    """A check's verdict, what it measured, and for FAIL/WARN how to fix it."""

    status: Status
    measured: str
    fix: str = ""


@dataclass(frozen=True)
class CheckResult:
    """One row of the doctor's table: the check's name and its outcome."""

    name: str
    outcome: Outcome
