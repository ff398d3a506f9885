"""Optimizers: build one from the `optim` config group, or vet that group up front."""
from harness.training.optim.build import OptimSpec, build_optimizer, validate_optim_config
from harness.training.optim.lamb import Lamb
from harness.training.optim.lion import Lion
from harness.training.optim.muon import MuonWithAdamW

__all__ = ["Lamb", "Lion", "MuonWithAdamW", "OptimSpec", "build_optimizer", "validate_optim_config"]
