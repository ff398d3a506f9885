"""The Hydra Sweeper plugin class: `hydra/sweeper=optuna`.

Hydra imports this module at every app start while it scans `hydra_plugins`, so the class only
stores its settings; everything that needs optuna is imported when a sweep actually starts.
"""
from __future__ import annotations

from typing import Any, List, Optional

from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

import hydra_plugins.harness_optuna_sweeper.config  # noqa: F401  (registers the configs)
from harness.launch.runner import TrialRunner


class OptunaSweeper(Sweeper):
    """Runs an Optuna study as a Hydra multirun: one process per trial, n_jobs at a time."""

    def __init__(
        self,
        sampler: DictConfig,
        pruner: DictConfig,
        runner: TrialRunner,
        direction: Any,
        n_trials: int,
        n_jobs: int,
        seed: Optional[int],
        storage: Optional[str],
        study_name: Optional[str],
        params: Optional[DictConfig],
        plots: bool,
        tensorboard: bool,
        test_best: bool,
    ) -> None:
        # Validation happens in sweep(): errors raised here would reach the user wrapped in
        # Hydra's multi-line instantiation error.
        self.options = dict(
            sampler=sampler,
            pruner=pruner,
            direction=direction,
            n_trials=n_trials,
            n_jobs=n_jobs,
            seed=seed,
            storage=storage,
            study_name=study_name,
            params=params,
            plots=plots,
            tensorboard=tensorboard,
            test_best=test_best,
        )
        self.runner = runner
        self.hydra_context: Optional[HydraContext] = None
        self.config: Optional[DictConfig] = None
        self.launcher: Optional[Launcher] = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        # The task function is not called here: every trial runs the app in a process of its
        # own. The launcher is kept only for the runner it may offer (trial_runner below).
        from hydra.core.plugins import Plugins

        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config)

    def trial_runner(self, n_jobs: int) -> TrialRunner:
        """The selected `hydra/launcher` runs the trials when it offers a runner of its own,
        `trial_runner(n_slots, grace_s=..., timeout_s=...)` (as `hydra/launcher=torchrun`
        does); otherwise `hydra.sweeper.runner`. Batches of Hydra's Launcher.launch are never
        used: they would block on their slowest trial."""
        from hydra._internal.core_plugins.basic_launcher import BasicLauncher

        offered = getattr(self.launcher, "trial_runner", None)
        if offered is not None:
            return offered(n_jobs, grace_s=self.runner.grace_s, timeout_s=self.runner.timeout_s)
        if self.launcher is not None and not isinstance(self.launcher, BasicLauncher):
            # Silently running the trials here instead would put a whole cluster sweep on this machine.
            from harness.core.errors import ConfigError

            raise ConfigError("hydra/launcher", type(self.launcher).__name__,
                              "basic (trials run on this machine), torchrun or slurm: hydra/sweeper=optuna "
                              "starts every trial itself and cannot drive this launcher (hydra/sweeper=basic "
                              "can, in batches)")
        return self.runner

    def sweep(self, arguments: List[str]) -> Any:
        from harness.entry.cli import fail
        from harness.core.errors import ConfigError
        from hydra_plugins.harness_optuna_sweeper._sweep import run_sweep

        assert self.hydra_context is not None and self.config is not None
        try:
            return run_sweep(self.config, self.options, self.hydra_context.config_loader, arguments,
                             self.validate_batch_is_legal, self.trial_runner)
        except ConfigError as err:
            fail(err)  # same contract as the app: one line on stderr, exit code 2
