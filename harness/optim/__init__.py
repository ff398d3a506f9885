"""Optimizers: build one from the `optim` config group, or vet that group up front."""
from harness.optim.build import build_optimizer, validate_optim_config
from harness.optim.lamb import Lamb
from harness.optim.lion import Lion
from harness.optim.muon import MuonWithAdamW

__all__ = ["Lamb", "Lion", "MuonWithAdamW", "build_optimizer", "validate_optim_config"]
