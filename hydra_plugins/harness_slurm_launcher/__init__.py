"""`hydra/launcher=slurm`: every trial of `hydra/sweeper=optuna` as its own SLURM job, or one run
as one job, through submitit (the `slurm` extra). See docs/slurm.md."""
