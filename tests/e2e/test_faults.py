"""Nothing lost under faults: damaged checkpoints, a full disk, a killed launcher, two runs in one
directory, an interrupted remedy copy. Each fault is injected through the CLI, as it happens to users."""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import CPU_RANKS, ROOT, compose_cfg, one_line_error, run_cli, train, wait_until
from harness.remedy.driver import attempt_config
from harness.config.run_config import validate_config
from harness.remedy.story import Attempt
from harness.state.checkpoint import checkpoint_problem, load_checkpoint, step_checkpoints
from harness.core.errors import ConfigError
from harness.state.run_lock import LOCK_FILE
from harness.logger.jsonl import read_metrics

SMALL = ["model=mlp", "data=synthetic", "model.width=32", "model.dropout=0.1", "logger=none", "diagnose=false",
         "trainer.max_steps=12", "trainer.log_every=1", "trainer.eval_every=4", "trainer.ckpt_every=4",
         "trainer.keep_last=3", "batch_size=16"]


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def zero(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


def empty(path: Path) -> None:
    path.write_bytes(b"")


def flip_a_byte(path: Path) -> None:
    """One byte inside a tensor's data: torch.load reads it back without a word."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGES = {"truncated": truncate, "zeroed": zero, "emptied": empty, "one byte flipped": flip_a_byte}


def final(run_dir: Path) -> dict:
    return load_checkpoint(step_checkpoints(run_dir)[0])


def same_run(a: Path, b: Path) -> None:
    """Bitwise equal weights and optimizer state, the same logged history."""
    sa, sb = final(a), final(b)
    assert sa["step"] == sb["step"]
    assert all(torch.equal(sa["model"][k], sb["model"][k]) for k in sa["model"])
    for x, y in zip(sa["optimizer"]["state"].values(), sb["optimizer"]["state"].values()):
        assert all(torch.equal(torch.as_tensor(x[k]), torch.as_tensor(y[k])) for k in x)
    rows = [[(r["step"], r["kind"], r.get("train/loss", r.get("val/loss"))) for r in read_metrics(d)] for d in (a, b)]
    assert rows[0] == rows[1]


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("straight") / "run"
    result = run_cli([*SMALL, f"hydra.run.dir={run_dir}"])
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


@pytest.fixture(scope="module")
def stopped(tmp_path_factory) -> Path:
    """A run stopped at step 8 (checkpoints 0, 4 and 8, best.pt): each test damages a copy."""
    run_dir = tmp_path_factory.mktemp("stopped") / "run"
    result = run_cli([*SMALL, "trainer.stop_after=8", f"hydra.run.dir={run_dir}"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert [p.name for p in step_checkpoints(run_dir)] == ["step_00000008.pt", "step_00000004.pt", "step_00000000.pt"]
    return run_dir


def stopped_at_8(tmp_path: Path, stopped: Path) -> Path:
    return Path(shutil.copytree(stopped, tmp_path / "run"))


@pytest.mark.parametrize("damage", ["truncated", "one byte flipped",
                                    *(pytest.param(d, marks=pytest.mark.slow) for d in ("zeroed", "emptied"))])
def test_a_damaged_newest_checkpoint_is_passed_over_with_a_warning_and_the_run_ends_bitwise_equal(
        damage, straight, stopped, tmp_path):
    run_dir = stopped_at_8(tmp_path, stopped)
    DAMAGES[damage](run_dir / "checkpoints" / "step_00000008.pt")
    result = run_cli([*SMALL, "resume=auto", f"hydra.run.dir={run_dir}"])
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout + result.stderr
    warnings = [line for line in out.splitlines() if "passed over" in line]
    assert len(warnings) == 1 and "[WARNING]" in warnings[0] and "step_00000008.pt" in warnings[0], out[-2000:]
    assert "resumed from" in out and "step_00000004.pt at step 4" in out
    same_run(straight, run_dir)


def test_every_step_checkpoint_damaged_resumes_from_best(straight, stopped, tmp_path):
    run_dir = stopped_at_8(tmp_path, stopped)
    for path in step_checkpoints(run_dir):
        truncate(path)
    best_step = load_checkpoint(run_dir / "checkpoints" / "best.pt")["step"]
    result = run_cli([*SMALL, "resume=auto", f"hydra.run.dir={run_dir}"])
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout + result.stderr
    assert sum("passed over" in line for line in out.splitlines()) == 3
    assert f"best.pt at step {best_step}" in out
    same_run(straight, run_dir)


def test_a_run_whose_checkpoints_are_all_damaged_is_refused_in_one_line_not_restarted(stopped, tmp_path):
    run_dir = stopped_at_8(tmp_path, stopped)
    for path in [*step_checkpoints(run_dir), run_dir / "checkpoints" / "best.pt"]:
        zero(path)
    before = {p: p.read_bytes() for p in (run_dir / "checkpoints").iterdir()}
    line = one_line_error(run_cli([*SMALL, "resume=auto", f"hydra.run.dir={run_dir}"]), "resume")
    assert "none of its 4 is" in line and "step_00000008.pt: zeroed" in line and "best.pt" in line
    assert {p: p.read_bytes() for p in (run_dir / "checkpoints").iterdir()} == before
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "stopped"  # not a fresh run's


def test_an_explicit_damaged_checkpoint_is_refused_in_one_line(stopped, tmp_path):
    run_dir = stopped_at_8(tmp_path, stopped)
    flip_a_byte(run_dir / "checkpoints" / "step_00000008.pt")
    line = one_line_error(run_cli([*SMALL, f"resume={run_dir / 'checkpoints' / 'step_00000008.pt'}",
                                   f"hydra.run.dir={tmp_path / 'other'}"]), "resume")
    assert "damaged" in line and not (tmp_path / "other").exists()


def test_a_sharded_checkpoint_is_verified_file_by_file(tmp_path):
    """Every file of a .dcp directory is in its manifest: a truncated or zeroed shard, a missing
    .metadata or a damaged state.pt is found without loading it."""
    train([*SMALL, "parallel=fsdp", "trainer.stop_after=8"], tmp_path / "run")
    newest = step_checkpoints(tmp_path / "run")[0]
    assert newest.name == "step_00000008.dcp" and checkpoint_problem(newest) is None
    cases = {"__0_0.distcp": (truncate, "truncated"), ".metadata": (lambda p: p.unlink(), "no .metadata"),
             "state.pt": (flip_a_byte, "damaged")}
    for name, (damage, said) in cases.items():
        copy = tmp_path / f"copy_{name.strip('._')}.dcp"
        shutil.copytree(newest, copy)
        damage(copy / name)
        assert said in checkpoint_problem(copy), name
    zeroed = tmp_path / "zeroed.dcp"
    shutil.copytree(newest, zeroed)
    zero(zeroed / "__0_0.distcp")
    assert "__0_0.distcp is damaged" in checkpoint_problem(zeroed)


@pytest.mark.slow  # ~16 s; the manifest's checks run in the default suite, bench_faults resumes past shards
def test_fsdp_resume_passes_over_a_truncated_shard(tmp_path):
    from conftest import torchrun

    args = [*SMALL, "parallel=fsdp", "hydra.run.dir=run"]
    torchrun([*args, "trainer.stop_after=8"], cwd=tmp_path)
    truncate(tmp_path / "run" / "checkpoints" / "step_00000008.dcp" / "__1_0.distcp")
    result = torchrun([*args, "resume=auto"], cwd=tmp_path)
    out = result.stdout + result.stderr
    assert sum("passed over" in line and "__1_0.distcp is" in line for line in out.splitlines()) == 1, out[-3000:]
    assert "step_00000004.dcp at step 4" in out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["steps"] == 12


def _no_temp_files(run_dir: Path) -> bool:
    return not any(p.name.endswith(".tmp") for p in run_dir.rglob("*"))


def _limit_file_size(limit: int):
    def preexec() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing
    return preexec


WIDE = [*SMALL, "model.width=256"]  # checkpoints of ~0.6 MB before the first update, ~1.8 MB after


def test_a_write_the_file_system_refuses_is_one_line_and_a_resume_finishes_bitwise_equal(tmp_path):
    """A file-size limit (a quota's effect, without root) makes the first checkpoint with optimizer
    state fail: one line naming the file and errno, exit 1, summary.json `failed`, no temp file, the
    earlier checkpoint intact; resume=auto then ends as an uninterrupted run."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "train.py"), *WIDE, f"hydra.run.dir={run_dir}"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, preexec_fn=_limit_file_size(1 << 20))
    assert result.returncode == 1 and "Traceback" not in result.stderr + result.stdout, result.stderr[-2000:]
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"error: could not write {run_dir / 'checkpoints'}/")  # best.pt or step_00000004.pt
    assert "(EFBIG)" in line
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and "EFBIG" in summary["error"]
    assert _no_temp_files(run_dir) and checkpoint_problem(run_dir / "checkpoints" / "step_00000000.pt") is None
    resumed = run_cli([*WIDE, "resume=auto", f"hydra.run.dir={run_dir}"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    straight = tmp_path / "straight"
    assert run_cli([*WIDE, f"hydra.run.dir={straight}"]).returncode == 0
    same_run(straight, run_dir)


@pytest.fixture
def small_disk(tmp_path):
    """A 3 MB tmpfs (root only, where mounts are allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root and a system that allows mounts")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow  # ~19 s; the default suite covers a refused write in one process (EFBIG), bench_faults this
def test_a_full_disk_is_one_line_under_fsdp_and_leaves_no_temporary_directory(small_disk, tmp_path):
    from conftest import torchrun

    run_dir = small_disk / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(ROOT / "train.py"),
           *WIDE, "parallel=fsdp", "trainer.max_steps=24", f"hydra.run.dir={run_dir}"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path,
                            env={**os.environ, **CPU_RANKS})
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "No space left on device (ENOSPC)" in errors[0], result.stderr[-3000:]
    assert "Traceback (most recent call last):\n  File \"" + str(ROOT) not in result.stderr
    assert _no_temp_files(run_dir) and json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
    kept = step_checkpoints(run_dir)
    assert kept and all(checkpoint_problem(p) is None for p in kept)
    moved = tmp_path / "moved"  # space freed: the run continues where it stopped
    shutil.copytree(run_dir, moved, symlinks=True)
    torchrun([*WIDE, "parallel=fsdp", "trainer.max_steps=24", "resume=auto", f"hydra.run.dir={moved}"], cwd=tmp_path)
    assert json.loads((moved / "summary.json").read_text())["status"] == "completed"


def _children(pid: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(proc.name))
            except (OSError, IndexError, ValueError):
                continue
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_ranks_die_with_their_killed_launcher(tmp_path):
    """kill -9 of torchrun alone (its ranks sit in sessions of their own): both ranks are gone
    within seconds, and the run dir is free for a resume."""
    run_dir = tmp_path / "run"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(ROOT / "train.py"),
           *SMALL, "trainer.max_steps=100000", "trainer.eval_every=1000", "trainer.ckpt_every=1000",
           f"hydra.run.dir={run_dir}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **CPU_RANKS})
    ranks: list[int] = []
    try:
        wait_until(lambda: len(read_metrics(run_dir)) > 20, "the ranks to train")
        ranks = [pid for pid in _children(proc.pid) if "train.py" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(ranks) == 2
        proc.kill()
        proc.wait(timeout=30)
        killed = time.monotonic()
        wait_until(lambda: not any(_alive(pid) for pid in ranks), "the ranks to die with their launcher", timeout=30)
        assert time.monotonic() - killed < 10
    finally:
        for pid in ranks:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
    result = run_cli([*SMALL, "trainer.max_steps=100000", "trainer.stop_after=30", "resume=auto",
                      f"hydra.run.dir={run_dir}"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "took over" in result.stdout + result.stderr


LONG = [*SMALL, "trainer.max_steps=100000", "trainer.eval_every=1000", "trainer.ckpt_every=50"]


def test_a_second_run_into_a_running_runs_directory_is_refused_naming_the_holder(tmp_path):
    run_dir = tmp_path / "run"
    first = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *LONG, "trainer.stop_after=400",
                              f"hydra.run.dir={run_dir}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(read_metrics(run_dir)) > 5, "the first run to train")
        second = run_cli([*LONG, "resume=auto", f"hydra.run.dir={run_dir}"])
        line = one_line_error(second, "hydra.run.dir")
        assert f"pid {first.pid} on" in line and "another run holds it" in line
        assert first.wait(timeout=300) == 0, first.stderr.read()[-2000:]
    finally:
        first.kill()
    steps = [r["step"] for r in read_metrics(run_dir) if r["kind"] == "train"]
    assert steps == sorted(set(steps)) and steps[-1] == 400  # one writer: no row twice
    assert (run_dir / LOCK_FILE).read_text() == ""  # released at the end


@pytest.mark.slow  # ~7 s; a second run into a running run's dir is refused in the default suite
def test_two_runs_started_together_into_one_directory_one_trains_the_other_is_refused(tmp_path):
    for trial in range(2):
        run_dir = tmp_path / f"run{trial}"
        cmd = [sys.executable, str(ROOT / "train.py"), *LONG, "trainer.stop_after=150", "resume=auto",
               f"hydra.run.dir={run_dir}"]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 2], [err[-1500:] for _, _, err in results]
        refused = next(err for code, _, err in results if code == 2)
        assert refused.strip().startswith("error: hydra.run.dir=") and len(refused.strip().splitlines()) == 1
        steps = [r["step"] for r in read_metrics(run_dir) if r["kind"] == "train"]
        assert steps == list(range(1, 151))


@pytest.mark.slow  # ~6 s; the killed-launcher test checks the takeover line in the default suite
def test_a_killed_runs_lock_is_taken_over_with_a_line(tmp_path):
    run_dir = tmp_path / "run"
    first = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *LONG, f"hydra.run.dir={run_dir}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: step_checkpoints(run_dir) and len(read_metrics(run_dir)) > 60, "a checkpoint")
    finally:
        first.kill()
        first.wait(timeout=30)
    result = run_cli([*LONG, "trainer.stop_after=100", "resume=auto", f"hydra.run.dir={run_dir}"])
    assert result.returncode == 0, result.stderr[-2000:]
    (line,) = [line for line in (result.stdout + result.stderr).splitlines() if "took over" in line]
    assert f"pid {first.pid}" in line and "ended without releasing it" in line


def test_the_remedy_restart_copy_is_atomic_and_checked_against_the_story(tmp_path, monkeypatch):
    train([*SMALL, "trainer.stop_after=8"], tmp_path / "attempts" / "1")
    source = tmp_path / "attempts" / "1" / "checkpoints" / "step_00000008.pt"
    attempt = Attempt(2, ["optim.lr=0.0005"], "from step 8 of attempt 1", str(source), 8)
    attempt_dir = tmp_path / "attempts" / "2"
    cfg = validate_config(compose_cfg([o for o in SMALL if o != "diagnose=false"]))

    def killed_mid_copy(src, dst, **_):  # the copy dies after writing half of the file
        Path(dst).write_bytes(Path(src).read_bytes()[:1000])
        raise KeyboardInterrupt

    monkeypatch.setattr(shutil, "copy2", killed_mid_copy)
    with pytest.raises(KeyboardInterrupt):
        attempt_config(cfg, attempt, attempt_dir)
    assert step_checkpoints(attempt_dir) == [] and _no_temp_files(attempt_dir)
    monkeypatch.undo()
    attempt_config(cfg, attempt, attempt_dir)
    (copied,) = step_checkpoints(attempt_dir)
    assert copied.name == "step_00000008.pt" and copied.read_bytes() == source.read_bytes()
    copied.write_bytes(copied.read_bytes()[:1000])  # the attempt's only checkpoint damaged: copied again
    attempt_config(cfg, attempt, attempt_dir)
    assert copied.read_bytes() == source.read_bytes()
    copied.unlink()
    zero(source)  # the story's checkpoint is gone bad: refused, not run from scratch
    with pytest.raises(ConfigError, match="attempts.json and checkpoints agree.*is zeroed"):
        attempt_config(cfg, attempt, attempt_dir)


def test_ctrl_c_checkpoints_the_current_step_and_stops_without_a_traceback(tmp_path):
    """Ctrl-C reaches the terminal's whole process group (DataLoader workers included): the run
    takes SIGTERM's path, with status `interrupted` and exit status 130; a second one stops at once."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *LONG, "data.num_workers=2",
                             f"hydra.run.dir={run_dir}"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        wait_until(lambda: len(read_metrics(run_dir)) > 30, "the run to train")
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130 and "Traceback" not in out + err, err[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "interrupted"
    assert step_checkpoints(run_dir)[0].name == f"step_{summary['steps']:08d}.pt"
    assert f"Ctrl-C at step {summary['steps']}: checkpoint saved" in out + err



def test_a_second_ctrl_c_stops_at_once(monkeypatch):
    """The first Ctrl-C arms the second: it ends the process on the spot, exit status 130."""
    from harness.loop import signals
    from harness.loop.signals import StopRequest, _stop_now

    monkeypatch.setattr(signals, "_interrupted", False)
    before = signal.getsignal(signal.SIGINT)
    try:
        request = StopRequest()
        request.install()
        os.kill(os.getpid(), signal.SIGINT)
        assert request.interrupted and signal.getsignal(signal.SIGINT) is _stop_now
    finally:
        signal.signal(signal.SIGINT, before)
    code = "import os, signal; from harness.loop.signals import _stop_now; _stop_now(signal.SIGINT, None)"
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 130 and result.stderr.startswith("Ctrl-C again: stopped now")


@pytest.mark.trajectory
def test_a_kill_after_a_stops_checkpoint_resumes_to_the_same_end(tmp_path):
    """A stop that writes a checkpoint (a NaN loss: diverged) and a kill before summary.json: the
    resume ends there with the same status, instead of training on from the stop."""
    nan_run = [*SMALL, "optim=sgd", "optim.lr=1000", "guard=off", "clip=null", "schedule.warmup=0",
               "trainer.max_steps=200"]
    straight = tmp_path / "straight"
    assert run_cli([*nan_run, f"hydra.run.dir={straight}"]).returncode == 0
    expected = json.loads((straight / "summary.json").read_text())
    assert expected["status"] == "diverged" and expected["steps"] < 200
    run_dir = tmp_path / "run"
    assert run_cli([*nan_run, f"hydra.run.dir={run_dir}"]).returncode == 0
    (run_dir / "summary.json").unlink()  # as if killed between the stop's checkpoint and summary.json
    resumed = run_cli([*nan_run, "resume=auto", f"hydra.run.dir={run_dir}"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["steps"]) == (expected["status"], expected["steps"])
    assert [r["step"] for r in read_metrics(run_dir)] == [r["step"] for r in read_metrics(straight)]
