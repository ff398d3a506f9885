"""Run one job as a torchrun job confined to its slot's GPUs (the sweeper's trial-runner seam)."""
import os
from typing import List, Sequence

from omegaconf import DictConfig

from harness.launch.runner import AppCommand, TrialRunner, TrialSpec
from harness.launch.torchrun import torchrun_prefix
from hydra_plugins.harness_torchrun_launcher.packing import Slot, gpus_per_job, plan_slots, slot_env


def visible_gpus(conf: DictConfig) -> int:
    if conf.num_gpus is not None:
        return int(conf.num_gpus)
    import torch

    return torch.cuda.device_count()


class TorchrunTrialRunner(TrialRunner):
    """Each trial is `torchrun ... train.py overrides` on its own disjoint GPU slice."""

    def __init__(self, conf: DictConfig, slots: Sequence[Slot], **kwargs) -> None:
        super().__init__(**kwargs)
        self.conf = conf
        self.slots = list(slots)

    @classmethod
    def for_jobs(cls, conf: DictConfig, wanted: int, **kwargs) -> "TorchrunTrialRunner":
        """Plan the GPU slices for up to `wanted` concurrent jobs from the launcher's keys."""
        num_gpus = visible_gpus(conf)
        per_job = gpus_per_job(conf.nproc_per_node, conf.gpus_per_trial, num_gpus)
        return cls(conf, plan_slots(num_gpus, per_job, conf.max_parallel, wanted), **kwargs)

    def capacity(self, requested: int) -> int:
        """Trials that fit at once: the GPU slices planned, never more than requested."""
        return min(requested, len(self.slots))

    def command(self, app: AppCommand, spec: TrialSpec) -> List[str]:
        return [*torchrun_prefix(self.conf, spec.slot), *self.app_argv(app, spec)]

    def env(self, spec: TrialSpec) -> dict:
        # torchrun sets OMP_NUM_THREADS=1 per rank itself; the slot pins the GPUs.
        env = slot_env(self.slots[spec.slot])
        if not self.slots[spec.slot] and "OMP_NUM_THREADS" not in os.environ:
            ranks = len(self.slots) * self.conf.nproc_per_node
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // ranks))
        return env
