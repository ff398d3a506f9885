"""Diagnose a finished (or crashed) run: name its pathologies, write report.md and plots/*.png.

    python scripts/diagnose.py outputs/2025-01-01/12-00-00

Prints one line per finding (nothing to fix: says so) and exits 0; a directory without
metrics.jsonl is a one-line error with exit code 2. A diagnose.remedy=auto run is diagnosed attempt by
attempt (attempts/N), and its top report.md rewritten. Training runs do this by themselves at the
end (`diagnose: true`); this is for older runs, copied runs, or after changing a rule.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.core.errors import ConfigError
from harness.diagnosis import MissingMetricsError, write_report
from harness.diagnosis.load import METRICS_FILE
from harness.diagnosis.report import REPORT_FILE
from harness.entry.cli import fail
from harness.remedy.report import write_top
from harness.remedy.story import attempt_dir, load_story


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a training run directory (holds metrics.jsonl)")
    run_dir = Path(parser.parse_args(argv).run_dir)
    story = load_story(run_dir)
    if story is not None:  # a diagnose.remedy=auto run: each attempt is a run of its own
        for attempt in story.attempts:
            if (attempt_dir(run_dir, attempt) / METRICS_FILE).is_file():
                print(f"attempt {attempt.number} ({attempt.restart}):")
                diagnose_one(attempt_dir(run_dir, attempt))
        if story.best_attempt:
            write_top(run_dir, story)
        print(f"report: {run_dir / REPORT_FILE}")
        return 0
    try:
        diagnose_one(run_dir)
    except MissingMetricsError:
        fail(ConfigError("RUN_DIR", str(run_dir), f"a training run directory holding {METRICS_FILE}"))
    print(f"report: {run_dir / REPORT_FILE}")
    return 0


def diagnose_one(run_dir: Path) -> None:
    findings = write_report(run_dir)
    for finding in findings:
        print(finding.summary_line())
    if not findings:
        print("no pathology found")


if __name__ == "__main__":
    sys.exit(main())
