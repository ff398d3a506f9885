"""The diagnosis while the run trains: the same rules on the metrics so far, at each eval.

A run that blew up in its first hundred steps should say so then, not after its last step; and
a sweep should not spend a trial's whole budget on a run already known to be sick. A new
critical finding is reported once, when it holds at two evals in a row (at once for a non-finite
loss); with `diagnose.abort_on=critical` it also stops the run.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from omegaconf import DictConfig

from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import RunData, read_config
from harness.diagnosis.rules import RULE_NAMES, diagnose
from harness.core.errors import ConfigError
from harness.core.metric_names import TRAIN_LOSS, VAL_LOSS

ABORT_ON = ("critical", "remedy")  # remedy: only a finding that carries one (diagnose.remedy=auto sets it)
REMEDY = ("off", "auto")
REMEDY_SCOPES = ("all", "training")  # training: no remedy that changes the model (init, activations, architecture)
SETTINGS = ("report", "live", "abort_on", "remedy", "max_attempts", "remedy_scope")
KEYS = (*SETTINGS, "ignore")  # `ignore` is read by `diagnose` itself, from the run's config.yaml


@dataclass(frozen=True)
class DiagnoseSettings:
    report: bool = True  # report.md (and plots) when training ends
    live: bool = True  # the rules at each eval: a new critical finding is printed once, as an event
    abort_on: str | None = None  # "critical": such a finding stops the run; "remedy": one that carries a remedy
    remedy: str = "off"  # "auto": a run the diagnosis calls sick starts again with its finding's remedy
    max_attempts: int = 3  # remedies applied at most, each in a new attempt
    remedy_scope: str = "all"  # "training": only remedies that leave the model as built (LR, clip, optimizer, ...)


def diagnose_settings(value: Any) -> DiagnoseSettings:
    """`diagnose` is a node of the keys above, or a bool: true for the defaults, false for none."""
    if isinstance(value, bool):
        return DiagnoseSettings() if value else DiagnoseSettings(report=False, live=False)
    return DiagnoseSettings(**{key: value.get(key, getattr(DiagnoseSettings, key)) for key in SETTINGS})


def validate_diagnose_config(value: Any) -> None:
    if isinstance(value, bool):
        return
    if not isinstance(value, (dict, DictConfig)):
        raise ConfigError("diagnose", value, f"true, false, or the keys {', '.join(KEYS)}")
    for key in value:
        if key not in KEYS:
            raise ConfigError(f"diagnose.{key}", value[key], f"one of the keys {list(KEYS)}")
    for key in ("report", "live"):
        if not isinstance(value.get(key, True), bool):
            raise ConfigError(f"diagnose.{key}", value.get(key), "true or false")
    ignore = value.get("ignore") or []
    if isinstance(ignore, str) or not all(name in RULE_NAMES for name in ignore):
        bad = ignore if isinstance(ignore, str) else next(name for name in ignore if name not in RULE_NAMES)
        raise ConfigError("diagnose.ignore", bad, f"a list of rule names, from {sorted(RULE_NAMES)}")
    if value.get("abort_on") is not None and value.get("abort_on") not in ABORT_ON:
        raise ConfigError("diagnose.abort_on", value.get("abort_on"), f"null (never stop) or one of {list(ABORT_ON)}")
    if value.get("remedy", "off") not in REMEDY:
        raise ConfigError("diagnose.remedy", value.get("remedy"), f"one of {list(REMEDY)}")
    if value.get("remedy_scope", "all") not in REMEDY_SCOPES:
        raise ConfigError("diagnose.remedy_scope", value.get("remedy_scope"), f"one of {list(REMEDY_SCOPES)}")
    attempts = value.get("max_attempts", 3)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
        raise ConfigError("diagnose.max_attempts", attempts, "an integer >= 1 (remedies applied at most)")
    if value.get("abort_on") is not None and not value.get("live", True):
        raise ConfigError("diagnose.abort_on", value.get("abort_on"), "null while diagnose.live=false (nothing "
                                                                      "is judged during the run)")


class History(Protocol):
    """The run's metric rows so far, kept in memory (harness/logger/memory.py)."""

    train: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    key_order: list[str]


class LiveDiagnosis:
    def __init__(self, run_dir: Path, history: History | None, settings: DiagnoseSettings, reported: set[str]) -> None:
        self.run_dir, self.history, self.abort_on = run_dir, history, settings.abort_on
        self.config = read_config(run_dir) if history is not None else {}  # written before training starts
        self.reported = set(reported)  # findings already reported (events survive a resume)

    def new_findings(self, summary: dict[str, Any]) -> list[Finding]:
        """Critical findings on the metrics logged so far that were not reported before, each one
        critical at the eval before as well: one eval's view of a noisy run (a batch-1 run's
        single-update swings, a schedule halfway through its decay) is not yet a verdict, and a
        finding that comes and goes is not the final report's. A non-finite loss needs no second
        look: it does not come back."""
        new = [f for f in self._critical(summary, self.history.train, self.history.evals)
               if f.name not in self.reported]
        if new and not self._nonfinite_loss():
            confirmed = self._critical_at_previous_eval(summary)
            new = [f for f in new if f.name in confirmed]
        self.reported.update(f.name for f in new)
        return new

    def _critical(self, summary: dict[str, Any], train: list[dict[str, Any]],
                  evals: list[dict[str, Any]]) -> list[Finding]:
        run = RunData(self.run_dir, self.config, summary, train, evals, self.history.key_order)
        return [f for f in diagnose(run) if f.severity is Severity.CRITICAL]

    def _critical_at_previous_eval(self, summary: dict[str, Any]) -> set[str]:
        """The critical findings' names on the rows logged up to the eval before this one (none at
        the first eval). Recomputed rather than remembered, so a resumed run judges as it would have."""
        steps = sorted({row["step"] for row in self.history.evals})
        if len(steps) < 2:
            return set()
        previous = steps[-2]
        train = [row for row in self.history.train if row["step"] <= previous]
        evals = [row for row in self.history.evals if row["step"] <= previous]
        return {f.name for f in self._critical({**summary, "steps": previous}, train, evals)}

    def _nonfinite_loss(self) -> bool:
        return any(not math.isfinite(row[key]) for rows, key in ((self.history.train, TRAIN_LOSS),
                                                                 (self.history.evals, VAL_LOSS))
                   for row in rows if isinstance(row.get(key), (int, float)))
