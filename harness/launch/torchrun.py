"""torchrun for the harness: the launcher's keys, the command line of one job, and the single run
that restarts itself under torchrun.

`python train.py hydra/launcher=torchrun ...` without -m: Hydra only consults a launcher in
multirun mode, so a single run would otherwise ignore the choice. train.py restarts the command
under torchrun before Hydra starts; the ranks get the same overrides minus the launcher's own and
run as ordinary DDP processes.

No `from __future__ import annotations`: the torchrun plugin registers `TorchrunLauncherConf`
during Hydra's plugin scan, before this module is in sys.modules, and dataclasses then cannot
resolve string annotations.
"""
import os
import sys
from dataclasses import dataclass
from typing import List, Optional

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

QUIET_TORCHRUN = "harness.launch.quiet_torchrun"
CHOICE = "hydra/launcher=torchrun"
KEY_PREFIX = "hydra.launcher."


@dataclass
class TorchrunLauncherConf:
    """Keys of `hydra/launcher=torchrun`."""

    _target_: str = "hydra_plugins.harness_torchrun_launcher.launcher.TorchrunLauncher"
    nproc_per_node: int = 1  # processes (ranks) per node for each job
    nnodes: str = "1"  # "N" or "MIN:MAX" (elastic), as torchrun takes it
    node_rank: Optional[int] = None  # static rendezvous only
    rdzv_backend: str = "c10d"
    rdzv_endpoint: Optional[str] = None  # HOST:PORT; null with nnodes=1 -> --standalone (a free port per job)
    rdzv_id: Optional[str] = None  # null: torchrun's default (standalone) or the job's run dir name
    gpus_per_trial: Optional[int] = None  # GPUs each job gets; null: nproc_per_node when GPUs exist, else 0
    max_parallel: Optional[int] = None  # jobs at once in a multirun; null: as many as the GPUs allow (1 on CPU)
    num_gpus: Optional[int] = None  # GPUs to pack jobs onto; null: all visible (torch.cuda.device_count())


def torchrun_prefix(conf: DictConfig, slot_index: int = 0) -> List[str]:
    """`python -m harness.launch.quiet_torchrun FLAGS` (torchrun, ending in the ranks' own words)
    for `conf` (the launcher's keys).

    Single-node jobs without an endpoint use --standalone, which picks a free rendezvous port,
    so concurrent jobs never collide. With an explicit endpoint, concurrent jobs get
    consecutive ports (HOST:PORT+slot).
    """
    argv = [sys.executable, "-m", QUIET_TORCHRUN, f"--nproc_per_node={conf.nproc_per_node}"]
    if str(conf.nnodes) == "1" and not conf.rdzv_endpoint:
        return [*argv, "--standalone"]
    argv += [f"--nnodes={conf.nnodes}", f"--rdzv_backend={conf.rdzv_backend}"]
    if conf.rdzv_endpoint:
        host, _, port = str(conf.rdzv_endpoint).rpartition(":")
        argv.append(f"--rdzv_endpoint={host}:{int(port) + slot_index}" if host else f"--rdzv_endpoint={conf.rdzv_endpoint}")
    if conf.rdzv_id:
        argv.append(f"--rdzv_id={conf.rdzv_id}")
    if conf.node_rank is not None:
        argv.append(f"--node_rank={conf.node_rank}")
    return argv


def wants_torchrun_single_run(args: List[str]) -> bool:
    multirun = any(a in ("-m", "--multirun") for a in args)
    return CHOICE in args and not multirun and "LOCAL_RANK" not in os.environ


def torchrun_argv(script: str, args: List[str]) -> List[str]:
    """The torchrun command for this single run; raises ValueError naming a bad launcher key."""
    settings = [a[len(KEY_PREFIX):] for a in args if a.startswith(KEY_PREFIX)]
    try:
        conf = OmegaConf.merge(OmegaConf.structured(TorchrunLauncherConf), OmegaConf.from_dotlist(settings))
    except OmegaConfBaseException as err:
        raise ValueError(f"hydra.launcher.{getattr(err, 'full_key', '')}: {err.msg if hasattr(err, 'msg') else err}") from None
    if conf.nproc_per_node < 1:
        raise ValueError(f"hydra.launcher.nproc_per_node={conf.nproc_per_node} is invalid: an integer >= 1")
    own = [a for a in args if a != CHOICE and not a.startswith(KEY_PREFIX)]
    return [*torchrun_prefix(conf), script, *own]


def relaunch_if_asked(argv: List[str]) -> None:
    """Replace this process by torchrun when a single run asks for the torchrun launcher."""
    if not wants_torchrun_single_run(argv[1:]):
        return
    try:
        cmd = torchrun_argv(argv[0], argv[1:])
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    from harness.state.run_lock import release_all

    release_all()  # the run dir's lock passes to torchrun's rank 0 (exec would drop it, leaving our name in it)
    os.execv(cmd[0], cmd)
