"""Starting runs as processes, shared by train.py, the Optuna sweeper and the launchers: the
command that starts one run of the app (app.py), the trial process runner (runner.py), torchrun's
command line and the single-run relaunch under it (torchrun.py, quiet_torchrun.py), and a single
run its launcher takes elsewhere (single.py). The Hydra plugins are thin adapters over these;
nothing here imports a plugin. Hydra's plugin scan imports the plugins, and they import these
modules: none imports torch or optuna at import time."""
