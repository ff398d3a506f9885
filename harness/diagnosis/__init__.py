"""Post-run diagnosis: name the pathology in a run's curves, with evidence, fix and plots.

    findings = write_report(run_dir)   # RUN_DIR/report.md + RUN_DIR/plots/*.png

`scripts/diagnose.py RUN_DIR` does the same from the command line.
"""
from harness.diagnosis.findings import Finding, Severity
from harness.diagnosis.load import MissingMetricsError, RunData, load_run
from harness.diagnosis.report import write_report
from harness.diagnosis.rules import RULES, diagnose

__all__ = ["Finding", "MissingMetricsError", "RULES", "RunData", "Severity", "diagnose", "load_run", "write_report"]
