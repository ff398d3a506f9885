"""Optimizers: build one from the `optim` config group, or vet that group up front."""
from harness.training.optim.build import build_optimizer, validate_optim_config
from harness.training.optim.lamb import Lamb
from harness.training.optim.lion import Lion
from harness.training.optim.muon import MuonWithAdamW

__all__ = ["Lamb", "Lion", "MuonWithAdamW", "build_optimizer", "validate_optim_config"]
