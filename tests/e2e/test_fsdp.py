"""parallel=fsdp under torchrun on CPU (gloo, 2 ranks): the sharded run equals one process, every
clip mode and the monitor give the unsharded numbers, the guard skips on every rank, rollbacks
and resumes go through sharded checkpoints (on another world size too), and nothing is left
running afterwards."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import CPU_RANKS, ROOT, compose_cfg, one_line_error, run_cli, torchrun, train, wait_until
from harness.state.checkpoint import load_checkpoint, step_checkpoints
from harness.config.run_config import validate_config
from harness.core.errors import ConfigError
from harness.training.optim import validate_optim_config
from harness.training.parallel import optimizer_config, parallel_config
from harness.logger.tracking import read_metrics

MLP = ["model=mlp", "data=synthetic", "model.width=32", "model.depth=3", "model.dropout=0.0", "batch_size=64",
       "trainer.max_steps=20", "trainer.log_every=1", "trainer.eval_every=10", "trainer.ckpt_every=10",
       "schedule.warmup=2", "logger=none", "diagnose=false"]
FSDP = [*MLP, "parallel=fsdp"]


def sharded_state(path: Path, tmp: Path) -> dict:
    """A .dcp checkpoint's model and optimizer as whole tensors (DCP's own converter, imported here:
    it costs every test worker a second at collection)."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    out = tmp / f"{path.parent.parent.name}_{path.name}.pt"
    dcp_to_torch_save(path, out)
    return torch.load(out, weights_only=False)


def final_weights(run_dir: Path, tmp: Path) -> dict[str, torch.Tensor]:
    newest = step_checkpoints(run_dir)[0]
    return sharded_state(newest, tmp)["model"] if newest.is_dir() else load_checkpoint(newest)["model"]


def no_process_left(marker: str) -> bool:
    """No process whose command line names `marker` (the test's own directory) is still alive."""
    mine = os.getpid()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != mine:
            try:
                if marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    return False
            except OSError:
                continue
    return True


def test_fsdp_with_accumulation_and_clipping_equals_one_process(tmp_path):
    done = torchrun([*FSDP, "accum=2", "clip=1.0", f"hydra.run.dir={tmp_path / 'fsdp'}"], cwd=tmp_path)
    assert "parallel=fsdp: 2 units (HiddenLayer) and the root, sharded over 2 ranks" in done.stdout + done.stderr
    steps = step_checkpoints(tmp_path / "fsdp")
    assert [p.name for p in steps] == ["step_00000020.dcp", "step_00000010.dcp"] and steps[0].is_dir()
    assert sorted(p.name for p in steps[0].iterdir()) == [".metadata", "__0_0.distcp", "__1_0.distcp",
                                                          "manifest.json", "state.pt"]
    best = tmp_path / "fsdp" / "checkpoints" / "best.dcp"
    assert best.is_symlink() and (best / ".metadata").is_file()
    train([*MLP, "accum=2", "clip=1.0"], tmp_path / "single")
    a, b = final_weights(tmp_path / "fsdp", tmp_path), final_weights(tmp_path / "single", tmp_path)
    assert a.keys() == b.keys() and max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6
    pre = [[r.get("grad/norm_preclip") for r in read_metrics(tmp_path / d)] for d in ("fsdp", "single")]
    assert max(abs(x - y) for x, y in zip(*pre) if x is not None) < 1e-5  # the global norm, over both shards
    assert no_process_left(str(tmp_path))

    exported = tmp_path / "best_model.pt"  # the best model as one ordinary file
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_checkpoint.py"), str(best), str(exported)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    plain = torch.load(exported, weights_only=True)
    whole = sharded_state(best.resolve(), tmp_path)["model"]
    assert plain["step"] in (10, 20) and {k: v.shape for k, v in plain["model"].items()} == {k: v.shape for k, v in b.items()}
    assert all(torch.equal(plain["model"][k], whole[k]) for k in whole)


@pytest.mark.parametrize("what", ["missing", "unfinished", "a .pt file", "existing out"])
def test_export_refuses_what_is_not_a_finished_sharded_checkpoint_in_one_line(tmp_path, what):
    checkpoint, out = tmp_path / "step_00000010.dcp", tmp_path / "out.pt"
    if what == "unfinished":
        checkpoint.mkdir()  # a write that a kill interrupted: no .metadata, no state.pt
    elif what == "a .pt file":
        checkpoint = tmp_path / "step_00000010.pt"
        torch.save({"model": {}}, checkpoint)
    elif what == "existing out":
        out.write_bytes(b"an earlier export")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "export_checkpoint.py"), str(checkpoint), str(out)],
                          capture_output=True, text=True, timeout=120)
    if what == "existing out":
        assert "a path that does not exist yet" in one_line_error(done, "out")
        assert out.read_bytes() == b"an earlier export"
    else:
        assert "a finished .dcp checkpoint directory" in one_line_error(done, "checkpoint") and not out.exists()


def test_every_clip_mode_and_the_monitor_agree_with_the_unsharded_model(tmp_path):
    done = torchrun([], cwd=tmp_path, script=ROOT / "tests" / "apps" / "fsdp_checks.py")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    for mode in ("norm", "value", "layer", "adaptive"):
        assert result[f"{mode}_clipped_something"], mode  # the threshold was low enough to act
        assert result[mode] < 1e-6, (mode, result[mode])
    assert result["monitor_keys_equal"] and result["monitor_metrics"] > 20 and result["monitor"] < 1e-5
    rank0, rank1 = result["fp16_scales"]  # an overflow on rank 1 only backs the loss scale off on both
    assert rank0 == rank1 and rank0[2] == rank0[1] / 2


@pytest.mark.trajectory
def test_a_nan_on_one_rank_is_skipped_on_both_and_leaves_the_optimizer_state_finite(tmp_path):
    torchrun([*FSDP, "fault=nan_grad", "fault.at=[7]", "fault.rank=1", f"hydra.run.dir={tmp_path / 'run'}"],
             cwd=tmp_path)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["skipped_steps"] == 1
    state = sharded_state(step_checkpoints(tmp_path / "run")[0], tmp_path)
    assert all(torch.isfinite(w).all() for w in state["model"].values())
    moments = [v for per_param in state["optimizer"]["state"].values() for v in per_param.values()]
    assert moments and all(torch.isfinite(v).all() for v in moments)
    steps = {float(p["step"]) for p in state["optimizer"]["state"].values()}
    assert steps == {19.0}  # 20 updates, one skipped on the device: parameters and moments untouched


@pytest.mark.trajectory
def test_repeated_bad_updates_roll_back_to_the_last_sharded_checkpoint(tmp_path):
    """With SGD, whose fused kernel DTensor cannot run: foreach kernels, the verdict read on the host.
    And 65 validation samples: shares of 33 and 32 would be 2 and 1 micro-batches of 32, and a sharded
    forward waits for every rank, so the eval sample is trimmed to equal shares (untrimmed, it hangs)."""
    torchrun([*FSDP, "optim=sgd", "fault=nan_grad", "fault.at=[13,14,15,16]", "guard.snapshot_every=null",
              "data.n_val=65", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, timeout=120)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    (rollback,) = [e for e in summary["events"] if e["kind"] == "rollback"]
    assert "rolled back to step 10 (step_00000010.dcp)" in rollback["message"]
    assert summary["status"] == "completed" and summary["steps"] == 20


@pytest.mark.slow  # ~36 s; sharded checkpoints are resumed in the default suite (two fsdp ranks resume a one-process run; a rollback)
def test_kill_9_then_resume_is_exact_and_one_process_resumes_a_two_rank_checkpoint(tmp_path):
    args = [*FSDP, "trainer.max_steps=100", "trainer.log_every=10", "trainer.eval_every=50",
            "trainer.ckpt_every=25", "trainer.keep_last=10"]
    torchrun([*args, "hydra.run.dir=straight"], cwd=tmp_path)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(ROOT / "train.py"), *args, "hydra.run.dir=pieces"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env={**os.environ, **CPU_RANKS},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until((tmp_path / "pieces" / "checkpoints" / "step_00000050.dcp").exists, "the step-50 checkpoint")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # torchrun and both ranks at once, mid-step
        proc.wait(timeout=60)
    assert not (tmp_path / "pieces" / "summary.json").exists()
    single = tmp_path / "single"  # one process takes over the 2-rank checkpoint of step 50
    train([*MLP, "trainer.max_steps=100", "trainer.log_every=10", "trainer.eval_every=50", "trainer.ckpt_every=25",
           f"resume={tmp_path / 'pieces' / 'checkpoints' / 'step_00000050.dcp'}"], single)
    torchrun([*args, "hydra.run.dir=pieces", "resume=auto"], cwd=tmp_path)
    a, b = final_weights(tmp_path / "straight", tmp_path), final_weights(tmp_path / "pieces", tmp_path)
    assert all(torch.equal(a[k], b[k]) for k in a)
    losses = {d: {r["step"]: r["train/loss"] for r in read_metrics(tmp_path / d) if "train/loss" in r}
              for d in ("straight", "single")}
    resumed = [step for step in losses["single"] if step > 50]
    assert len(resumed) == 5 and max(abs(losses["single"][s] - losses["straight"][s]) for s in resumed) < 1e-5
    assert no_process_left(str(tmp_path))


@pytest.mark.slow  # ~12 s; the other direction (2 -> 1) runs in the default suite
def test_two_ranks_with_fsdp_resume_a_one_process_run(tmp_path):
    """1 -> 2: an unsharded run's .pt checkpoint (whole tensors, optimizer state numbered) is
    sharded on load; the sharded run continues as the unsharded one would have."""
    args = [*MLP, "trainer.max_steps=40", "trainer.log_every=5", "trainer.eval_every=20"]
    train([*args, "trainer.stop_after=20"], tmp_path / "run")
    torchrun([*args, "parallel=fsdp", "resume=auto", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    train(args, tmp_path / "straight")
    losses = {d: {r["step"]: r["train/loss"] for r in read_metrics(tmp_path / d) if "train/loss" in r}
              for d in ("run", "straight")}
    assert sorted(losses["run"]) == sorted(losses["straight"]) == list(range(5, 45, 5))
    assert max(abs(losses["run"][s] - losses["straight"][s]) for s in losses["straight"]) < 1e-5
    assert step_checkpoints(tmp_path / "run")[0].name == "step_00000040.dcp"


@pytest.mark.parametrize("override,key,allowed", [
    ("parallel.wrap=[Blok]", "parallel.wrap", "class names of the model's modules"),
    ("parallel.reshard_after_forward=maybe", "parallel.reshard_after_forward", "true or false"),
    ("mode=doctor", "parallel", "none or ddp with mode=doctor"),
    ("optim=adafactor", "optim._target_", "an optimizer that steps sharded parameters"),
])
def test_bad_fsdp_settings_are_one_line_with_nothing_written(tmp_path, override, key, allowed):
    result = run_cli([*FSDP, override, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert allowed in one_line_error(result, key)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_only_fused_kernels_that_run_on_shards_stay_fused():
    sharded, whole = parallel_config({"name": "fsdp"}), parallel_config({"name": "ddp"})
    def spec(option: str):
        return validate_optim_config(compose_cfg([f"optim={option}"]).optim)

    assert optimizer_config(spec("sgd"), sharded).options["fused"] is False
    assert optimizer_config(spec("sgd"), whole).options["fused"] is True
    assert optimizer_config(spec("adamw"), sharded).options["fused"] is True


def test_parallel_none_under_torchrun_is_refused_before_anything_starts():
    with pytest.raises(ConfigError, match="ddp or fsdp under torchrun"):
        validate_config(compose_cfg([*MLP, "parallel=none"]), world_size=2)
    validate_config(compose_cfg([*MLP, "parallel=none"]), world_size=1)
