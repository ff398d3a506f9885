"""Keys of `hydra/launcher=slurm`, registered in Hydra's ConfigStore.

No `from __future__ import annotations`: Hydra's plugin scan runs this module before it is in
sys.modules, and dataclasses then cannot resolve string annotations.
"""
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf


@dataclass
class SlurmLauncherConf:
    _target_: str = "hydra_plugins.harness_slurm_launcher.launcher.SlurmLauncher"
    partition: Optional[str] = None  # null: the cluster's default partition
    nodes: int = 1
    gpus_per_node: int = 0
    tasks_per_node: int = 1  # processes per node; more than one (or several nodes) runs torchrun in the job
    cpus_per_task: Optional[int] = None
    mem_gb: Optional[float] = None
    time: int = 60  # minutes; the job gets SIGUSR2 signal_delay_s before it, checkpoints and is submitted again
    account: Optional[str] = None
    qos: Optional[str] = None
    constraint: Optional[str] = None
    additional_parameters: Dict[str, Any] = field(default_factory=dict)  # any other sbatch option, e.g. {exclusive: true}
    setup: List[str] = field(default_factory=list)  # shell lines run before the trial (module load, conda activate)
    max_parallel: Optional[int] = None  # jobs in flight at once; null: hydra.sweeper.n_jobs
    signal_delay_s: int = 90
    poll_s: float = 2.0  # seconds between looks at a job's state
    max_requeues: int = 5  # times a job is requeued after its time-limit warning (or resubmitted after a preemption)
    wait: bool = False  # a single run (no -m): follow the job to its end instead of returning once it is queued


ConfigStore.instance().store(group="hydra/launcher", name="slurm", node=SlurmLauncherConf, provider="harness")


def launcher_params(given: Mapping[str, Any]) -> Dict[str, Any]:
    """The launcher's keys, each with its default when not given, without Hydra's `_target_`."""
    merged = OmegaConf.merge(OmegaConf.structured(SlurmLauncherConf), dict(given))
    params = OmegaConf.to_container(merged, resolve=True)
    params.pop("_target_", None)
    return params
