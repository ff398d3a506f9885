"""The doctor's table: rich on a terminal, plain text elsewhere, and RUN_DIR/doctor.md + doctor.json."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from harness.modes.doctor.result import CheckResult, Status

STYLES = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "bold red", Status.SKIP: "dim"}


def counts(results: list[CheckResult]) -> dict[str, int]:
    return {s.value.lower(): sum(r.outcome.status is s for r in results) for s in Status}


def headline(results: list[CheckResult]) -> str:
    c = counts(results)
    verdict = "FAILED" if c["fail"] else "passed"
    return f"doctor {verdict}: " + ", ".join(f"{n} {k}" for k, n in c.items() if n)


def plain_table(results: list[CheckResult]) -> str:
    width = max(len(r.name) for r in results)
    lines = []
    for r in results:
        lines.append(f"{r.outcome.status.value:<4}  {r.name:<{width}}  {r.outcome.measured}")
        if r.outcome.fix:
            lines.append(f"{'':<4}  {'':<{width}}  fix: {r.outcome.fix}")
    return "\n".join(lines)


def markdown(results: list[CheckResult]) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    rows = [f"| {r.outcome.status.value} | {cell(r.name)} | {cell(r.outcome.measured)} | {cell(r.outcome.fix)} |"
            for r in results]
    return "\n".join([f"# Doctor\n\n{headline(results)}\n", "| status | check | measured | fix |",
                      "|---|---|---|---|", *rows, ""])


def print_table(results: list[CheckResult]) -> None:
    if not sys.stdout.isatty():
        print(plain_table(results), flush=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=headline(results), show_lines=True)
    for column in ("status", "check", "measured", "fix"):
        table.add_column(column, overflow="fold")
    for r in results:
        o = r.outcome
        table.add_row(f"[{STYLES[o.status]}]{o.status.value}[/]", r.name, o.measured, o.fix)
    Console().print(table)


def write(results: list[CheckResult], run_dir: Path) -> None:
    (run_dir / "doctor.md").write_text(markdown(results))
    data = {"counts": counts(results),
            "checks": [{"name": r.name, "status": r.outcome.status.value, "measured": r.outcome.measured,
                        "fix": r.outcome.fix} for r in results]}
    (run_dir / "doctor.json").write_text(json.dumps(data, indent=2))
