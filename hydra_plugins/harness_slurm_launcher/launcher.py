"""The launcher Hydra instantiates for `hydra/launcher=slurm`. Our Optuna sweeper takes its trial
runner, so each trial is one SLURM job queued the moment a slot frees; Hydra's own batches
(`Launcher.launch`) would wait for the slowest job of each, so they are refused."""
from typing import Any, Optional, Sequence

from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from hydra_plugins.harness_slurm_launcher.runner import SlurmTrialRunner


class SlurmLauncher(Launcher):
    def __init__(self, **params: Any) -> None:
        self.params = params
        self.config: Optional[DictConfig] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        if "harness_optuna_sweeper" not in str(config.hydra.sweeper.get("_target_")):
            _refuse()  # before any sweeper writes into the sweep dir
        self.config = config

    def trial_runner(self, n_slots: int, grace_s: float = 10.0, timeout_s: Optional[float] = None) -> SlurmTrialRunner:
        return SlurmTrialRunner(self.params, grace_s=grace_s, timeout_s=timeout_s)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        _refuse()

    @staticmethod
    def submit_single_run(cfg: DictConfig) -> int:
        """`python train.py hydra/launcher=slurm ...` without -m (harness.launch.single): the run
        becomes one SLURM job."""
        from hydra_plugins.harness_slurm_launcher.single import submit_run

        return submit_run(cfg)


def _refuse() -> None:
    from harness.entry.cli import fail
    from harness.core.errors import ConfigError

    fail(ConfigError("hydra/launcher", "slurm", "used with hydra/sweeper=optuna, which queues every trial as its own "
                                                "SLURM job (Hydra's basic sweeper would wait for each batch's "
                                                "slowest job)"))
