"""Hydra Launcher: each job of a multirun is its own torchrun job, packed onto free GPUs.

Our Optuna sweeper drives trials itself (a new one starts the moment a slot frees up) and
only borrows this launcher's keys through `TorchrunTrialRunner`; Hydra's basic sweeper calls
`launch` below, which runs its batch the same way.
"""
import json
import logging
import queue
import threading
from pathlib import Path
from typing import List, Optional, Sequence

from hydra.core.utils import JobReturn, JobStatus
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from harness.launch.app import app_command
from harness.launch.runner import TrialSpec
from harness.launch.torchrun import TorchrunLauncherConf
from hydra_plugins.harness_torchrun_launcher.runner import TorchrunTrialRunner, visible_gpus

log = logging.getLogger(__name__)


class JobFailed(RuntimeError):
    """A torchrun job that exited non-zero or left no summary.json."""


class TorchrunLauncher(Launcher):
    def __init__(self, **conf) -> None:
        self.conf = OmegaConf.merge(OmegaConf.structured(TorchrunLauncherConf), conf)
        self.config: Optional[DictConfig] = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config

    def trial_runner(self, n_slots: int, grace_s: float, timeout_s: Optional[float]) -> TorchrunTrialRunner:
        """Our Optuna sweeper runs its trials through this: torchrun, one GPU slice per slot."""
        return TorchrunTrialRunner.for_jobs(self.conf, wanted=n_slots, grace_s=grace_s, timeout_s=timeout_s)

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Hydra's basic sweeper: the batch runs packed onto the GPUs (on CPU: `max_parallel`, default 1)."""
        assert self.config is not None
        app = app_command(self.config)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        wanted = len(job_overrides) if visible_gpus(self.conf) else (self.conf.max_parallel or 1)
        runner = TorchrunTrialRunner.for_jobs(self.conf, wanted=wanted)
        jobs: "queue.Queue[int]" = queue.Queue()
        for i in range(len(job_overrides)):
            jobs.put(i)
        returns: List[Optional[JobReturn]] = [None] * len(job_overrides)
        stop = threading.Event()

        def work(slot: int) -> None:
            while True:
                try:
                    i = jobs.get_nowait()
                except queue.Empty:
                    return
                number = initial_job_idx + i
                spec = TrialSpec(number=number, run_dir=sweep_dir / str(number), overrides=tuple(job_overrides[i]),
                                 env={}, slot=slot, n_slots=len(runner.slots))
                log.info("#%d on slot %d %s: %s", number, slot, runner.slots[slot] or "(cpu)", " ".join(spec.overrides))
                returns[i] = _job_return(spec, runner.run(app, spec, stop).exit_code)

        threads = [threading.Thread(target=work, args=(slot,), daemon=True) for slot in range(len(runner.slots))]
        for t in threads:
            t.start()
        try:
            for t in threads:
                t.join()
        except KeyboardInterrupt:
            stop.set()
            for t in threads:
                t.join()
            raise
        return [r for r in returns if r is not None]


def _job_return(spec: TrialSpec, exit_code: Optional[int]) -> JobReturn:
    ret = JobReturn(overrides=list(spec.overrides), working_dir=str(spec.run_dir), task_name=spec.run_dir.name)
    summary = spec.run_dir / "summary.json"
    if exit_code == 0 and summary.exists():
        ret.status, ret.return_value = JobStatus.COMPLETED, json.loads(summary.read_text()).get("objective")
    else:
        ret.status = JobStatus.FAILED
        ret.return_value = JobFailed(f"job {spec.number} exited with {exit_code}; see {spec.run_dir / 'trial.log'}")
    return ret
