"""Hydra Sweeper plugin on Optuna 5: `python train.py -m hydra/sweeper=optuna ...`.

Hydra's plugin scan imports the public modules at every app start, so they stay free of
optuna: `config` (ConfigStore entries), `optuna_sweeper` (the plugin class) and `runner` (how
a trial process is started: the seam for torchrun). The sweep itself lives in underscore
modules, which the scan skips and a sweep imports when it starts. See docs/sweeps.md.
"""
