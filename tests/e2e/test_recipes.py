"""The reference recipes reach the numbers docs/configuration.md quotes (slow: minutes each). Their debug=smoke
versions run in the default suite (tests/e2e/test_groups_smoke.py runs every experiment option)."""
from __future__ import annotations

import pytest

from conftest import train
from harness.diagnosis import Severity, diagnose, load_run

pytestmark = pytest.mark.slow
# docs/configuration.md quotes 1.376 and 4.430 (same seed, same machine); the margin absorbs other CPUs' float order.
LSTM_VAL_LOSS = 1.40
BPE_GPT_VAL_LOSS = 4.46


def alarms(run_dir) -> list[str]:
    """Warning and critical findings: a healthy recipe has none."""
    return [f.name for f in diagnose(load_run(run_dir)) if f.severity in (Severity.CRITICAL, Severity.WARNING)]


@pytest.mark.trajectory
def test_digits_resnet_reaches_97_percent_in_under_a_minute(tmp_path):
    pytest.importorskip("sklearn", reason="data=digits needs the optional vision extra")
    _, summary = train(["experiment=digits_resnet"], tmp_path / "run")
    assert summary["status"] == "completed"
    assert summary["best_val_accuracy"] >= 0.97
    assert summary["wall_time_s"] < 60
    assert alarms(tmp_path / "run") == []


@pytest.mark.trajectory
def test_stdlib_lstm_reaches_its_quoted_val_loss(tmp_path):
    _, summary = train(["experiment=stdlib_lstm"], tmp_path / "run")
    assert summary["status"] == "completed" and summary["best_val_loss"] <= LSTM_VAL_LOSS
    assert alarms(tmp_path / "run") == []


@pytest.mark.trajectory
def test_baby_gpt_on_bpe_tokens_reaches_its_quoted_val_loss(tmp_path):
    _, summary = train(["experiment=baby_gpt", "data.tokenizer=bpe"], tmp_path / "run")
    assert summary["status"] == "completed" and summary["best_val_loss"] <= BPE_GPT_VAL_LOSS
    assert (tmp_path / "run" / "tokenizer.json").is_file()
    assert alarms(tmp_path / "run") == []
