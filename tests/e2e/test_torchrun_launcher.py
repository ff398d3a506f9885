"""GPU packing and torchrun command lines (fake device counts: CI has no GPU), plus a real CPU job."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from conftest import CPU_RANKS, one_line_error, run_cli, run_dirs
from harness.launch.torchrun import torchrun_prefix
from harness.launch.torchrun import TorchrunLauncherConf
from hydra_plugins.harness_torchrun_launcher.packing import gpus_per_job, plan_slots, slot_env
from harness.launch.torchrun import torchrun_argv, wants_torchrun_single_run
from hydra_plugins.harness_torchrun_launcher.runner import TorchrunTrialRunner


@pytest.mark.parametrize("num_gpus,per_job,max_parallel,wanted,expected", [
    (8, 2, None, 10, [(0, 1), (2, 3), (4, 5), (6, 7)]),   # 4 trials of 2 GPUs at once
    (8, 2, 3, 10, [(0, 1), (2, 3), (4, 5)]),              # capped by max_parallel
    (8, 2, None, 2, [(0, 1), (2, 3)]),                    # no more slots than jobs
    (7, 2, None, 10, [(0, 1), (2, 3), (4, 5)]),           # the odd GPU stays idle, never shared
    (4, 4, None, 10, [(0, 1, 2, 3)]),
    (0, 0, None, 3, [(), (), ()]),                        # CPU: as many as the caller wants
    (0, 0, 2, 5, [(), ()]),
])
def test_plan_slots(num_gpus, per_job, max_parallel, wanted, expected):
    slots = plan_slots(num_gpus, per_job, max_parallel, wanted)
    assert slots == expected
    used = [g for s in slots for g in s]
    assert len(used) == len(set(used))  # disjoint


def test_a_job_bigger_than_the_machine_is_refused():
    with pytest.raises(ValueError, match="needs 4 GPUs but only 2"):
        plan_slots(2, 4, None, 1)


def test_gpus_per_job_and_env():
    assert gpus_per_job(nproc_per_node=2, gpus_per_trial=None, num_gpus=8) == 2
    assert gpus_per_job(nproc_per_node=2, gpus_per_trial=1, num_gpus=8) == 1
    assert gpus_per_job(nproc_per_node=2, gpus_per_trial=None, num_gpus=0) == 0
    assert slot_env((2, 3)) == {"CUDA_VISIBLE_DEVICES": "2,3"} and slot_env(()) == {}


def conf(**kw):
    return OmegaConf.merge(OmegaConf.structured(TorchrunLauncherConf), kw)


def test_runner_env_pins_each_slot_to_its_gpus():
    runner = TorchrunTrialRunner.for_jobs(conf(nproc_per_node=2, num_gpus=8), wanted=3)
    assert runner.slots == [(0, 1), (2, 3), (4, 5)]

    class Spec:
        def __init__(self, slot):
            self.slot = slot

    assert [runner.env(Spec(i))["CUDA_VISIBLE_DEVICES"] for i in range(3)] == ["0,1", "2,3", "4,5"]


def test_torchrun_flags():
    standalone = torchrun_prefix(conf(nproc_per_node=2))
    assert standalone[-2:] == ["--nproc_per_node=2", "--standalone"]
    multi = torchrun_prefix(conf(nproc_per_node=8, nnodes="2", rdzv_endpoint="head:29500", rdzv_id="exp"), slot_index=3)
    assert "--nnodes=2" in multi and "--rdzv_endpoint=head:29503" in multi and "--rdzv_id=exp" in multi
    assert "--standalone" not in multi


def test_single_run_relaunch_argv():
    args = ["hydra/launcher=torchrun", "hydra.launcher.nproc_per_node=3", "optim=sgd"]
    assert wants_torchrun_single_run(args) and not wants_torchrun_single_run(["-m", *args])
    cmd = torchrun_argv("train.py", args)
    assert cmd[-2:] == ["train.py", "optim=sgd"] and "--nproc_per_node=3" in cmd
    with pytest.raises(ValueError, match="nproc_per_node"):
        torchrun_argv("train.py", ["hydra/launcher=torchrun", "hydra.launcher.nproc_per_node=0"])


def test_single_run_under_torchrun_launcher(tmp_path):
    """`python train.py hydra/launcher=torchrun hydra.launcher.nproc_per_node=2` trains with 2 ranks."""
    result = run_cli(["hydra/launcher=torchrun", "hydra.launcher.nproc_per_node=2", "model=mlp", "data=synthetic",
                      "debug=smoke", "diagnose=false"], cwd=tmp_path, env=CPU_RANKS)
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = run_dirs(tmp_path)  # named as any run's: outputs/<date>/<time>
    assert (run_dir / "train_rank1.log").exists()
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"


def test_a_refused_config_under_the_torchrun_launcher_is_one_line_and_exit_2(tmp_path):
    """Both ranks refuse; the launcher adds neither torchrun's ChildFailedError traceback nor its ERROR log."""
    result = run_cli(["hydra/launcher=torchrun", "hydra.launcher.nproc_per_node=2", "model=mlp", "data=synthetic",
                      "debug=smoke", "optim.lr=-1", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path,
                     env=CPU_RANKS)
    assert one_line_error(result, "optim.lr") == "error: optim.lr=-1 is invalid: a finite number > 0"
    assert result.stdout.strip() == "" and not (tmp_path / "run").exists()


RANK_SCRIPT = """import os, signal, sys
if os.environ["RANK"] == "1":
    {action}
"""


@pytest.mark.parametrize("action,code,killed", [
    ("sys.exit(3)", 3, False),  # a rank that failed said why itself: nothing is added
    ("os.kill(os.getpid(), signal.SIGKILL)", 137, True),  # it could not: one line says what happened
])
def test_quiet_torchrun_ends_with_the_failed_rank_exit_code(tmp_path, action, code, killed):
    script = tmp_path / "job.py"
    script.write_text(RANK_SCRIPT.format(action=action))
    result = subprocess.run([sys.executable, "-m", "harness.launch.quiet_torchrun", "--standalone",
                             "--nproc_per_node=2", str(script)], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert result.returncode == code, result.stderr[-2000:]
    assert "Traceback" not in result.stderr and "ChildFailedError" not in result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    if killed:
        assert len(errors) == 1 and errors[0].startswith("error: rank 1 (pid ") and errors[0].endswith("SIGKILL")
    else:
        assert errors == []


def test_more_ranks_on_a_node_than_it_has_gpus_are_refused_by_every_rank(monkeypatch):
    """Each rank takes the GPU of its local rank: two processes on a one-GPU node would leave rank 1
    on an invalid device ordinal and rank 0 waiting for it, so both refuse in one line."""
    import torch

    from harness.core.distributed import DistInfo
    from harness.core.errors import ConfigError
    from harness.modes.run import rank_device

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    for rank in (0, 1):
        with pytest.raises(ConfigError) as err:
            rank_device(torch.device("cuda"), DistInfo(rank=rank, local_rank=rank, world_size=2), "auto")
        assert str(err.value).startswith("device='auto' is invalid: cpu, or at most 1 process(es) per node")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")  # one rank per node, over two nodes: each has its GPU
    assert rank_device(torch.device("cuda"), DistInfo(rank=1, local_rank=0, world_size=2), "auto") == \
        torch.device("cuda", 0)
    assert rank_device(torch.device("cpu"), DistInfo(rank=1, local_rank=1, world_size=2), "auto").type == "cpu"
