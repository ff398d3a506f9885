"""The diagnosis as a whole: rule names, every rule exercised, runs with little or nothing logged,
report.md and scripts/diagnose.py."""
from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from diagnosis_runs import Run, bumps, diagnose_cli
from harness.diagnosis import RULES, MissingMetricsError, write_report


def test_diagnose_ignore_names_only_known_rules():
    from harness.diagnosis.live import validate_diagnose_config
    from harness.core.errors import ConfigError
    validate_diagnose_config(OmegaConf.create({"ignore": ["frozen_parameters"]}))
    with pytest.raises(ConfigError, match="diagnose.ignore='frozen_paramters' is invalid"):
        validate_diagnose_config(OmegaConf.create({"ignore": ["frozen_paramters"]}))


def test_every_rule_is_exercised_by_these_files():
    """Each rule has a synthetic run in one of the rule families' files (test_diagnosis_*.py)."""
    names = {rule.__name__ for rule in RULES}
    source = "".join(path.read_text() for path in Path(__file__).parent.glob("test_diagnosis_*.py"))
    assert names == {name for name in names if f'"{name}"' in source}


def test_run_without_config_or_summary_is_still_diagnosed(tmp_path):
    run_dir = Run().set("train/loss", lambda s, v: float("nan") if s > 200 else v).write(tmp_path / "run")
    (run_dir / "config.yaml").unlink()
    (run_dir / "summary.json").unlink()
    assert [f.name for f in write_report(run_dir)] == ["diverging"]
    assert "unknown (no summary.json)" in (run_dir / "report.md").read_text()


def test_run_that_logged_nothing_gets_an_empty_report(tmp_path):
    (tmp_path / "metrics.jsonl").write_text("")
    assert write_report(tmp_path) == []
    assert "No pathology found" in (tmp_path / "report.md").read_text()
    assert not list((tmp_path / "plots").glob("*.png"))


def test_missing_metrics_is_an_error(tmp_path):
    with pytest.raises(MissingMetricsError):
        write_report(tmp_path)


def test_report_lists_findings_and_plots(tmp_path):
    run = Run().set("train/loss", bumps)
    run.config["clip"] = 100.0
    run_dir = run.write(tmp_path / "run")
    findings = write_report(run_dir)
    report = (run_dir / "report.md").read_text()
    for finding in findings:
        assert f"`{finding.name}`" in report and finding.evidence in report and finding.fix in report
    plots = sorted(p.name for p in (run_dir / "plots").glob("*.png"))
    assert plots == sorted(["loss.png", "lr.png", "grad_norm.png", "layer_grad_norms.png", "block_grad_ratio.png",
                            "update_ratio.png", "param_norm.png", "dead_units.png"])
    for name in plots:
        assert f"](plots/{name})" in report


def test_report_without_monitors_has_only_the_global_plots(tmp_path):
    run = Run()
    for row in run.train:
        for key in [k for k in row if "/" in k and k.split("/")[0] in ("grad_norm", "param_norm", "update_ratio",
                                                                      "param", "act_dead")]:
            del row[key]
    run_dir = run.write(tmp_path / "run")
    assert write_report(run_dir) == []
    assert sorted(p.name for p in (run_dir / "plots").glob("*.png")) == ["grad_norm.png", "loss.png", "lr.png"]
    assert "No pathology found" in (run_dir / "report.md").read_text()


def test_cli_on_a_diverged_run_with_nan_losses(tmp_path):
    run = Run().set("train/loss", lambda s, v: v if s < 120 else (1e4 if s == 120 else float("nan")))
    run.train = [r for r in run.train if r["step"] <= 130]
    run.evals = [r for r in run.evals if r["step"] <= 100]
    run.summary.update(status="diverged", steps=130, reason="step 130: training loss is nan; stopping",
                       events=[{"step": 130, "kind": "diverged", "message": "step 130: training loss is nan"}])
    run_dir = run.write(tmp_path / "run")
    result = diagnose_cli(str(run_dir))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("diverging [critical]: ")
    assert f"report: {run_dir / 'report.md'}" in result.stdout
    assert (run_dir / "report.md").is_file() and (run_dir / "plots" / "loss.png").stat().st_size > 0


def test_cli_without_metrics_is_a_one_line_error(tmp_path):
    result = diagnose_cli(str(tmp_path))
    assert result.returncode == 2
    expected = f"error: RUN_DIR='{tmp_path}' is invalid: a training run directory holding metrics.jsonl"
    assert result.stderr.strip() == expected
    assert not (tmp_path / "report.md").exists()

