"""torchrun on CPU (gloo, 2 processes): DDP equals one process, ranks agree, resume is exact."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import CPU_RANKS, ROOT, run_dirs, torchrun, train, wait_until
from harness.state.checkpoint import load_checkpoint, step_checkpoints
from harness.logger.tracking import read_metrics

MLP = ["model=mlp", "data=synthetic", "model.width=32", "model.dropout=0.0", "batch_size=64",
       "trainer.max_steps=20", "trainer.log_every=1", "trainer.eval_every=10", "trainer.ckpt_every=10",
       "schedule.warmup=2", "logger=none", "diagnose=false"]


def final_params(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(step_checkpoints(run_dir)[0])["model"]


@pytest.mark.parametrize("accum", [1, pytest.param(2, marks=pytest.mark.slow)])  # accum=2: ~10 s more
def test_two_ranks_equal_one_process(tmp_path, accum):
    torchrun([*MLP, f"accum={accum}"], cwd=tmp_path)
    (ddp_dir,) = run_dirs(tmp_path)  # exactly one run dir for both ranks
    assert (ddp_dir / "train.log").exists() and (ddp_dir / "train_rank1.log").exists()
    assert (ddp_dir / ".hydra" / "config.yaml").exists()
    train([*MLP, f"accum={accum}"], tmp_path / "single")
    a, b = final_params(ddp_dir), final_params(tmp_path / "single")
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6


@pytest.mark.trajectory
def test_nan_on_one_rank_makes_both_skip(tmp_path):
    torchrun([*MLP, "fault=nan_grad", "fault.at=[7]", "fault.rank=1"], cwd=tmp_path, timeout=120)
    (run_dir,) = run_dirs(tmp_path)
    import json

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["skipped_steps"] == 1
    assert all(torch.isfinite(p).all() for p in final_params(run_dir).values())


@pytest.mark.slow  # ~25 s; the SIGTERM test below resumes bit-exact under torchrun too
def test_stop_and_resume_under_torchrun_is_exact(tmp_path):
    args = [*MLP, "model.dropout=0.1"]
    torchrun([*args, "hydra.run.dir=straight"], cwd=tmp_path)
    torchrun([*args, "hydra.run.dir=pieces", "trainer.stop_after=10"], cwd=tmp_path)
    torchrun([*args, "hydra.run.dir=pieces", "resume=auto"], cwd=tmp_path)
    a, b = final_params(tmp_path / "straight"), final_params(tmp_path / "pieces")
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = [[r.get("train/loss") for r in read_metrics(tmp_path / d)] for d in ("straight", "pieces")]
    assert losses[0] == losses[1] and len(losses[0]) > 20


@pytest.mark.slow  # ~35 s; the stop-with-a-checkpoint path (Ctrl-C takes SIGTERM's) and kill -9 resumes stay in the default suite
def test_sigterm_under_torchrun_checkpoints_and_resume_is_exact(tmp_path):
    """A preemption at an arbitrary moment: the ranks agree to stop at a step boundary, save,
    and the resumed run ends bit-for-bit where an uninterrupted one does."""
    import signal

    args = [*MLP, "trainer.max_steps=400", "trainer.eval_every=100", "trainer.ckpt_every=100", "model.dropout=0.1"]
    torchrun([*args, "hydra.run.dir=straight"], cwd=tmp_path)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(ROOT / "train.py"), *args, "hydra.run.dir=pieces"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env={**os.environ, **CPU_RANKS},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    metrics = tmp_path / "pieces" / "metrics.jsonl"
    try:
        wait_until(lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= 30, "30 metrics rows")
        proc.send_signal(signal.SIGTERM)  # what a scheduler sends before it takes the machine back
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:  # the test failed: torchrun and its ranks go with it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    import json

    first = json.loads((tmp_path / "pieces" / "summary.json").read_text())
    assert first["status"] == "preempted" and 30 <= first["steps"] < 400
    torchrun([*args, "hydra.run.dir=pieces", "resume=auto"], cwd=tmp_path)
    a, b = final_params(tmp_path / "straight"), final_params(tmp_path / "pieces")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow  # ~12 s
def test_resume_with_another_world_size_continues(tmp_path):
    """2 ranks stop; one process resumes: weights, optimizer and data position carry over."""
    torchrun([*MLP, "hydra.run.dir=run", "trainer.stop_after=10"], cwd=tmp_path)
    _, summary = train([*MLP, "resume=auto"], tmp_path / "run")
    assert summary["status"] == "completed" and summary["steps"] == 20
    single = tmp_path / "single"
    train(MLP, single)
    a, b = final_params(tmp_path / "run"), final_params(single)
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6  # dropout off: same math


def test_an_update_empty_on_every_rank_is_skipped_by_both_and_one_empty_on_one_rank_is_not(tmp_path):
    """Samples 32-47 (the whole third batch) and 56-63 (rank 1's half of the fourth) hold only padding."""
    empty = [*range(32, 48), *range(56, 64)]
    shutil.copy(ROOT / "tests" / "user_code.py", tmp_path)  # user code lies beside where train.py starts
    torchrun(["data=custom", "data._target_=user_code.padded_sequences", "data.task=lm",
              "model._target_=user_code.LSTMNet", "+model.hidden=16", "batch_size=16", "data.shuffle=false",
              "trainer.max_steps=8", "trainer.log_every=4", "trainer.eval_every=8", "trainer.ckpt_every=8",
              "logger=none", "diagnose=false", f"+data.empty=[{','.join(map(str, empty))}]"], cwd=tmp_path)
    (run_dir,) = run_dirs(tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["empty_steps"] == 1 and summary["skipped_steps"] == 0 and summary["status"] == "completed"
    assert [e["step"] for e in summary["events"] if e["kind"] == "skip_empty"] == [3]


def test_a_refused_config_under_torchrun_prints_once_and_leaves_nothing(tmp_path):
    """Every rank meets the same bad value: rank 0 says it, once; the run dir, with the other
    rank's train_rank1.log, is gone; rank 0's console carries no INFO of rank 1 either."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(ROOT / "train.py"),
           "model=mlp", "data=synthetic", "debug=smoke", "optim.lr=-1", f"hydra.run.dir={tmp_path / 'run'}"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env={**os.environ, **CPU_RANKS})
    assert result.returncode != 0
    errors = [line for line in (result.stdout + result.stderr).splitlines() if line.startswith("error:")]
    assert errors == ["error: optim.lr=-1 is invalid: a finite number > 0"]
    assert not (tmp_path / "run").exists()
    # torchrun's own report names the line as the root cause, not "To enable traceback see ..."
    assert "traceback : error: optim.lr=-1 is invalid: a finite number > 0" in result.stderr


def test_a_refused_config_is_the_last_line_under_the_quiet_torchrun(tmp_path):
    """README's form: torchrun's flags, the harness's line last, and the exit code 2."""
    cmd = [sys.executable, "-m", "harness.launch.quiet_torchrun", "--standalone", "--nproc_per_node=2",
           str(ROOT / "train.py"), "model=mlp", "data=synthetic", "schedule.warmup=100", "trainer.max_steps=100"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env={**os.environ, **CPU_RANKS},
                            cwd=tmp_path)
    assert result.returncode == 2
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert lines[-1].startswith("error: schedule.warmup=100 is invalid") and len(lines) == 1
    assert not (tmp_path / "outputs").exists() or not run_dirs(tmp_path)
