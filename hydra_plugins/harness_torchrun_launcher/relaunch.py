"""`python train.py hydra/launcher=torchrun ...` without -m: restart the command under torchrun.

Hydra only consults a launcher in multirun mode, so a single run would otherwise ignore the
choice. The ranks torchrun starts get the same overrides minus the launcher's own, and run as
ordinary DDP processes.
"""
import os
import sys
from typing import List

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from harness.run_lock import release_all
from hydra_plugins.harness_torchrun_launcher.command import torchrun_prefix
from hydra_plugins.harness_torchrun_launcher.config import TorchrunLauncherConf

CHOICE = "hydra/launcher=torchrun"
KEY_PREFIX = "hydra.launcher."


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
    release_all()  # the run dir's lock passes to torchrun's rank 0 (exec would drop it, leaving our name in it)
    os.execv(cmd[0], cmd)
