"""`hydra/launcher=slurm`: every trial of `hydra/sweeper=optuna` as its own SLURM job, through
submitit (the `slurm` extra). See docs/distributed.md, SLURM."""
