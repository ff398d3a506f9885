"""One row of the doctor's table: what was checked, the verdict, what was measured and how to fix it."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Status(str, Enum):
    PASS = "PASS"
    WARN = "WARN"  # works, but likely not what was meant
    FAIL = "FAIL"  # training this way wastes the run; `train.py` exits 1
    SKIP = "SKIP"  # the check does not apply (the reason is in `measured`)


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    measured: str
    fix: str = ""
