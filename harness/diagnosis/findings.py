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


class Restart(str, Enum):
    """Where a run with a remedy applied starts again."""

    CHECKPOINT = "checkpoint"  # the last checkpoint before the symptom: LR, clip, precision, loss scaling, accumulation
    SCRATCH = "scratch"  # step 0: init, activation, architecture, schedule shape


@dataclass(frozen=True)
class Remedy:
    """A config-level fix that is safe to apply without a person: the overrides, where the run
    starts again with them, and why they help. Findings that need a person (labels, data bugs,
    unused parameters, overfitting) carry none."""

    overrides: tuple[str, ...]  # Hydra overrides, e.g. ("optim.lr=0.001", "clip=1.0")
    restart: Restart
    why: str
    before_step: int | None = None  # the symptom's first step: restart from the last checkpoint before it
    kind: str = ""  # what it changes (lr_down, lr_up, clip, optimizer, init, activation, ...): tried once per run
    changes_model: bool = False  # init, activation or architecture: off under diagnose.remedy_scope=training
    any_objective: bool = False  # safe under the user's own objective too (it replaces an output that trains nothing)

    def describe(self) -> str:
        where = ("from scratch" if self.restart == Restart.SCRATCH else
                 "from the last checkpoint" + (f" before step {self.before_step}" if self.before_step else ""))
        model = " (changes the model)" if self.changes_model else ""
        return f"`{' '.join(self.overrides)}`{model}, {where}: {self.why}"


@dataclass(frozen=True)
class Finding:
    name: str  # stable snake_case id, e.g. "diverging"; tests and tools match on it
    severity: Severity
    title: str  # one human line: what is wrong
    evidence: str  # the steps and values that show it
    fix: str  # what to change, naming config keys
    remedies: tuple[Remedy, ...] = ()  # what diagnose.remedy=auto may apply by itself, likeliest cause first

    @property
    def remedy(self) -> Remedy | None:
        """The first candidate: the one a report leads with."""
        return self.remedies[0] if self.remedies else None

    def summary_line(self) -> str:
        return f"{self.headline()}. {self.evidence} Fix: {self.fix}"

    def headline(self) -> str:
        """What the console shows: one line; the evidence and the fix are in report.md."""
        return f"{self.name} [{self.severity.value}]: {self.title}"
