"""The torchrun command line for one job."""
import sys
from typing import List

from omegaconf import DictConfig

QUIET_TORCHRUN = "hydra_plugins.harness_torchrun_launcher.quiet"


def torchrun_prefix(conf: DictConfig, slot_index: int = 0) -> List[str]:
    """`python -m ...quiet FLAGS` (torchrun, ending in the ranks' own words) for `conf` (the launcher's keys).

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
