"""Nothing is lost: a new run never overwrites an earlier run's results, and stale temp files go."""
from __future__ import annotations

import shutil

import pytest

from conftest import compose_cfg, one_line_error, run_cli, train
from harness.core.errors import ConfigError
from harness.modes.run import run

SMOKE = ["model=mlp", "data=synthetic", "model.width=16", "debug=smoke", "logger=none", "diagnose=false"]


def snapshot(run_dir):
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in run_dir.rglob("*") if p.is_file()}


def test_a_second_run_in_a_finished_run_dir_is_refused_and_touches_nothing(tmp_path):
    run_dir = tmp_path / "exp1"
    first = run_cli([*SMOKE, f"hydra.run.dir={run_dir}"])
    assert first.returncode == 0, first.stderr[-2000:]
    before = snapshot(run_dir)
    second = run_cli([*SMOKE, "seed=2", f"hydra.run.dir={run_dir}"])
    line = one_line_error(second, "hydra.run.dir")
    assert line.startswith(f"error: hydra.run.dir='{run_dir}' is invalid:") and "resume=auto" in line
    assert "overwrite=true" in line
    assert snapshot(run_dir) == before  # .hydra/ and train.log included


def test_in_process_the_same_rule_holds(tmp_path):
    train(SMOKE, tmp_path / "run")
    with pytest.raises(ConfigError, match="resume=auto"):
        run(compose_cfg(["diagnose=false", *SMOKE]), run_dir=tmp_path / "run")


def test_overwrite_true_replaces_the_earlier_results(tmp_path):
    train(SMOKE, tmp_path / "run")
    (tmp_path / "run" / "checkpoints" / "step_00000099.pt").write_bytes(b"from an earlier run")
    _, summary = train([*SMOKE, "overwrite=true", "seed=3"], tmp_path / "run")
    assert summary["status"] == "completed"
    assert not (tmp_path / "run" / "checkpoints" / "step_00000099.pt").exists()


def test_resume_auto_continues_and_removes_stale_temp_files(tmp_path):
    train([*SMOKE, "trainer.stop_after=3"], tmp_path / "run")
    stale = tmp_path / "run" / "checkpoints" / ".step_00000006.pt.x1y2.tmp"
    stale.write_bytes(b"half a checkpoint")
    _, summary = train([*SMOKE, "resume=auto"], tmp_path / "run")
    assert summary["status"] == "completed" and summary["steps"] == 6
    assert not stale.exists()


def test_a_quoted_run_dir_is_the_folder_hydra_reads_and_nothing_else_is_made(tmp_path):
    """`hydra.run.dir='runs/a b'` (the form a sweep's trials get) names the folder `runs/a b`: no
    `'runs` folder beside it, from the run-dir check or its lock."""
    result = run_cli([*SMOKE, "hydra.run.dir='runs/a b'"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]
    assert (tmp_path / "runs" / "a b" / "summary.json").is_file()
    refused = run_cli([*SMOKE, "hydra.run.dir='runs/a b'"], cwd=tmp_path)
    assert "runs/a b" in one_line_error(refused, "hydra.run.dir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs"]



# Every way a command into a finished run dir can be refused after Hydra has written its files:
# the run's saved overrides, its config, its log and its lock must all stay byte for byte.
REFUSALS = {
    "a resume that would jump the LR": (["resume=auto", "trainer.max_steps=60"], "trainer.max_steps"),
    "an eval of a checkpoint that is not there": (["mode=eval", "eval.checkpoint=nowhere.pt"], "eval.checkpoint"),
    "a resume of a run already complete (exit 0, nothing trained)": (["resume=auto"], None),
    "a resume with a value the config refuses": (["resume=auto", "trainer.max_steps=60", "optim.lr=-1"], "optim.lr"),
    "a resume with a bad objective": (["resume=auto", "trainer.max_steps=60", "schedule=constant",
                                       "loss._target_=no_such_module.objective"], "loss._target_"),
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """One finished run, trained as a user would; each refusal gets a copy of it."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    first = run_cli(["model=mlp", "data=synthetic", "model.width=16", "trainer.max_steps=40", "logger=none",
                     "diagnose=false", f"hydra.run.dir={run_dir}"])
    assert first.returncode == 0, first.stderr[-2000:]
    return run_dir


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
def test_a_refused_command_leaves_a_finished_run_dir_as_it_was(tmp_path, finished_run, refusal):
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    before = snapshot(run_dir)
    overrides, key = REFUSALS[refusal]
    result = run_cli([f"hydra.run.dir={run_dir}", *overrides])
    if key is None:
        assert result.returncode == 0 and "nothing was changed" in result.stdout, result.stderr[-2000:]
    else:
        one_line_error(result, key)
    assert snapshot(run_dir) == before


WRITER = """
import sys, time
from pathlib import Path
report, ready = Path(sys.argv[1]), Path(sys.argv[2])
n = 0
while True:  # a finished run's plotter (or any tool) rewriting a file of the run dir, on and on
    report.write_text(f"report, draft {n}")
    n += 1
    ready.touch()
    time.sleep(0.005)
"""


def test_a_refusal_touches_nothing_while_another_process_writes_into_the_run_dir(tmp_path, finished_run):
    """Right after a run, its background plotter still rewrites report.md: a command refused then
    must still put back every file Hydra and the lock wrote (acceptance is not read off the dir)."""
    import subprocess
    import sys
    import time

    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    ready = tmp_path / "writing"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(run_dir / "report.md"), str(ready)])
    try:
        while not ready.exists():
            time.sleep(0.01)
        before = {p: v for p, v in snapshot(run_dir).items() if p.name != "report.md"}
        result = run_cli([f"hydra.run.dir={run_dir}", "resume=auto", "trainer.max_steps=60"])
    finally:
        writer.kill()
        writer.wait()
    one_line_error(result, "trainer.max_steps")
    assert {p: v for p, v in snapshot(run_dir).items() if p.name != "report.md"} == before
