"""A finished `train.py` run ends without the interpreter's teardown, yet leaves every file complete;
its plots follow from a background process."""
from __future__ import annotations

import json

from conftest import run_cli, wait_for_plots
from harness.diagnosis.report import PLOTS_PENDING


def test_a_cli_run_ends_fast_with_its_files_whole_and_plots_follow(tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli(["model=mlp", "data=synthetic", "debug=smoke", f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"
    log = (run_dir / "train.log").read_text().splitlines()
    assert "diagnosis report:" in log[-1]  # the log handlers were flushed before the process ended
    assert {"config.yaml", "hydra.yaml", "overrides.yaml"} <= {p.name for p in (run_dir / ".hydra").iterdir()}
    report = wait_for_plots(run_dir)
    assert PLOTS_PENDING not in report and "](plots/loss.png)" in report
    assert (run_dir / "plots" / "loss.png").stat().st_size > 0
    assert not list(run_dir.glob(".*.tmp"))  # the report was replaced whole, not left half-written
