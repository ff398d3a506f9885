"""RUN_DIR/report.md: the run's key numbers, each finding with evidence and fix, and the plots."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.diagnosis.coverage import not_judged
from harness.diagnosis.findings import Finding
from harness.diagnosis.outcome import outcome
from harness.diagnosis.load import RunData, load_run
from harness.diagnosis.rules import diagnose
from harness.diagnosis.signals import fmt

REPORT_FILE = "report.md"
PLOTS_DIR = "plots"


PLOTS_PENDING = "The plots are being drawn into `plots/` by a background process; this section lists them when done."


def write_report(run_dir: Path | str, plots: bool = True) -> list[Finding]:
    """Diagnose the run in `run_dir`, write report.md (and plots/*.png) there; returns the findings.
    plots=False writes the findings only, without importing matplotlib, and says the plots are
    pending (harness.diagnosis.draw adds them). Raises MissingMetricsError without metrics.jsonl."""
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    findings = diagnose(run)
    drawn = None
    if plots:
        from harness.diagnosis.plots import make_plots

        drawn = make_plots(run, run_dir / PLOTS_DIR)
    report, partial = run_dir / REPORT_FILE, run_dir / f".{REPORT_FILE}.tmp"
    partial.write_text(render(run, findings, drawn))
    os.replace(partial, report)  # a reader sees the old report or the new one, never half of one
    return findings


def render(run: RunData, findings: list[Finding], plots: list[tuple[str, str]] | None) -> str:
    lines = [f"# Diagnosis of `{run.run_dir.name}`", "", "| | |", "|---|---|"]
    lines += [f"| {label} | {value} |" for label, value in _facts(run)]
    lines += ["", "## Findings", ""]
    if not findings:
        lines.append("No pathology found: none of the rules in harness/diagnosis/rules matched this run.")
    for i, f in enumerate(findings, 1):
        lines += [f"### {i}. `{f.name}` ({f.severity.value}): {f.title}", "",
                  f"**Evidence.** {f.evidence}", "", f"**Fix.** {f.fix}", ""]
        if len(f.remedies) == 1:
            lines += [f"**Remedy** (safe to apply without a person): {f.remedy.describe()}.", ""]
        elif f.remedies:
            lines += ["**Remedies** (safe to apply without a person; `diagnose.remedy=auto` tries them in this "
                      "order and keeps what helps):", *(f"{i}. {r.describe()}." for i, r in enumerate(f.remedies, 1)),
                      ""]
    if plots is None:
        lines += ["", "## Plots", "", PLOTS_PENDING]
    elif plots:
        lines += ["", "## Plots", ""]
        for title, name in plots:
            lines += [f"### {title}", "", f"![{title}]({PLOTS_DIR}/{name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def _facts(run: RunData) -> list[tuple[str, str]]:
    s, ended = run.summary, outcome(run)
    facts: list[tuple[str, Any]] = [
        ("status", s.get("status", "unknown (no summary.json)")),
        ("outcome", ended.line() if ended is not None else None),
        ("steps", f"{s.get('steps', run.train[-1]['step'] if run.train else 0)} / {run.max_steps or '?'}"),
        ("final train loss", s.get("final_train_loss")),
        ("best val loss", s.get("best_val_loss")),
        ("chance loss (ln K)", s.get("chance_loss")),
        ("known optimum", s.get("optimum_loss")),
        ("objective", s.get("user_loss")),
        *(("not judged", line) for line in not_judged(run, ended)),
        ("skipped / fp16 overflow / empty updates",
         f"{s.get('skipped_steps', 0)} / {s.get('overflow_steps', 0)} / {s.get('empty_steps', 0)}"),
    ]
    return [(label, fmt(value) if isinstance(value, float) else str(value)) for label, value in facts
            if value is not None]
