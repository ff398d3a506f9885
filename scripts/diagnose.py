"""Diagnose a finished (or crashed) run: name its pathologies, write report.md and plots/*.png.

    python scripts/diagnose.py outputs/2025-01-01/12-00-00

Prints one line per finding (nothing to fix: says so) and exits 0; a directory without
metrics.jsonl is a one-line error with exit code 2. Training runs do this by themselves at the
end (`diagnose: true`); this is for older runs, copied runs, or after changing a rule.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a plain checkout

from harness.cli import fail  # noqa: E402
from harness.diagnosis import MissingMetricsError, write_report  # noqa: E402
from harness.diagnosis.load import METRICS_FILE  # noqa: E402
from harness.diagnosis.report import REPORT_FILE  # noqa: E402
from harness.errors import ConfigError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", metavar="RUN_DIR", help="a training run directory (holds metrics.jsonl)")
    run_dir = Path(parser.parse_args(argv).run_dir)
    try:
        findings = write_report(run_dir)
    except MissingMetricsError:
        fail(ConfigError("RUN_DIR", str(run_dir), f"a training run directory holding {METRICS_FILE}"))
    for finding in findings:
        print(finding.summary_line())
    if not findings:
        print("no pathology found")
    print(f"report: {run_dir / REPORT_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
