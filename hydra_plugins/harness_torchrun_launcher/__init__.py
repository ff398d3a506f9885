"""`hydra/launcher=torchrun`: every job (a single run, or each trial of a sweep) as a torchrun job."""
