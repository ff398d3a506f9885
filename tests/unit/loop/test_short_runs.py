"""Defaults that fit any run length: a run shorter than the monitor's cadence still gets its statistics."""
from __future__ import annotations

from conftest import train
from harness.logger.tracking import read_metrics


def test_full_monitor_collects_on_a_run_shorter_than_its_cadence(tmp_path):
    train(["model=mlp", "data=synthetic", "model.width=16", "monitor=full", "trainer.max_steps=20",
           "trainer.log_every=5", "trainer.eval_every=10", "schedule.warmup=2", "logger=none"], tmp_path / "run")
    collected = [r["step"] for r in read_metrics(tmp_path / "run") if any(k.startswith("act_mean/") for k in r)]
    assert collected == [5, 10, 15, 20]  # monitor.every=100 > 20 steps: every 20 // 4 = 5 steps
