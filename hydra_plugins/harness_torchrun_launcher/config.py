"""Keys of `hydra/launcher=torchrun`, registered in Hydra's ConfigStore.

No `from __future__ import annotations`: Hydra's plugin scan runs this module before it is in
sys.modules, and dataclasses then cannot resolve string annotations.
"""
from dataclasses import dataclass
from typing import Optional

from hydra.core.config_store import ConfigStore


@dataclass
class TorchrunLauncherConf:
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


ConfigStore.instance().store(group="hydra/launcher", name="torchrun", node=TorchrunLauncherConf, provider="harness")
