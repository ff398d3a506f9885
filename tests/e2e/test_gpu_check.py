"""scripts/gpu_check.py: it skips cleanly without CUDA, and its tiny CPU run goes through the
same code paths a GPU run takes and prints a table of finite numbers."""
from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "gpu_check.py"


def run_script(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"})


def table_rows(stdout: str) -> list[dict[str, str]]:
    lines = [line for line in stdout.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, (cell.strip() for cell in line.strip("|").split("|")))) for line in lines[2:]]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the script would run")
def test_without_cuda_it_says_why_it_skips_and_exits_0():
    result = run_script([], timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1 and "skipped: no CUDA device" in lines[0]


def test_tiny_cpu_run_prints_a_table_of_finite_numbers():
    result = run_script(["--device", "cpu", "--steps", "4", "--block", "2", "--peak-tflops", "0.5"], timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    rows = table_rows(result.stdout)
    assert [(r["model"], r["precision"], r["compile"], r["parallel"]) for r in rows] == [
        ("tiny", "fp32", "off", "ddp"), ("tiny", "fp32", "off", "fsdp"), ("tiny", "bf16", "off", "ddp"),
        ("tiny", "bf16", "off", "fsdp")]
    for row in rows:
        for column in ("ms/step", "tokens/s", "bare ms/step", "harness/bare", "host syncs/step"):
            value = float(row[column].replace(",", ""))
            assert math.isfinite(value) and value >= 0, (column, row)
        assert float(row["ms/step"]) > 0 and float(row["tokens/s"].replace(",", "")) > 0
        assert 0 < float(row["MFU"].rstrip("%")) < 100  # from --peak-tflops: CPUs have no table entry
    assert "GFLOP/update in closed form" in result.stdout


@pytest.mark.slow
def test_tiny_cpu_run_compiled():
    """compile=on: the harness's and the bare loop's models compiled, then released for the next row (~40 s)."""
    result = run_script(["--device", "cpu", "--precisions", "fp32", "--compile", "on", "--steps", "2", "--block", "1"],
                        timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    (row,) = table_rows(result.stdout)
    assert row["compile"] == "on" and math.isfinite(float(row["ms/step"]))
