"""What a diagnosis rule reports: one named pathology, the numbers that show it, and the fix."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):
    """How much a finding matters; reports list the worst first."""

    CRITICAL = "critical"  # the run failed or learned nothing useful
    WARNING = "warning"  # the run works worse than it should
    INFO = "info"  # a setting that does nothing useful; no harm done yet

    @property
    def rank(self) -> int:
        return list(Severity).index(self)


@dataclass(frozen=True)
class Finding:
    name: str  # stable snake_case id, e.g. "diverging"; tests and tools match on it
    severity: Severity
    title: str  # one human line: what is wrong
    evidence: str  # the steps and values that show it
    fix: str  # what to change, naming config keys

    def summary_line(self) -> str:
        return f"{self.name} [{self.severity.value}]: {self.title}. {self.evidence} Fix: {self.fix}"
