"""A trial runner that uses both halves of the seam, as a torchrun runner would: it wraps the
command (here in `env`, there in `torchrun`) and gives each slot its own environment (there:
CUDA_VISIBLE_DEVICES). Selected with hydra.sweeper.runner._target_=slot_runner.SlotRunner."""
from __future__ import annotations

from harness.launch.runner import AppCommand, TrialRunner, TrialSpec


class SlotRunner(TrialRunner):
    def command(self, app: AppCommand, spec: TrialSpec) -> list[str]:
        return ["env", "FAKE_WRAPPED=1", *super().command(app, spec)]

    def env(self, spec: TrialSpec) -> dict[str, str]:
        return {**super().env(spec), "FAKE_SLOT": str(spec.slot)}
