"""LR range test (`python train.py mode=lr_find`): sweep the LR exponentially over real updates,
suggest one, plot it, and leave the model and optimizer as they were."""
from __future__ import annotations

import logging
from pathlib import Path

import torch

from harness.assembly.assemble import Assembly, assemble
from harness.state.run_dir_snapshot import accept_command
from harness.config.run_config import RunConfig
from harness.core.errors import ConfigError
from harness.config.lr_find import LRFindConfig
from harness.modes.lr_find.report import as_json, plot, summary_line, write_json
from harness.modes.lr_find.suggest import Suggestion, suggest_lr
from harness.modes.lr_find.sweep import Sweep, range_test

__all__ = ["LRFindConfig", "Suggestion", "Sweep", "find_lr", "run_lr_find"]
log = logging.getLogger("harness")


def sweep_config(config: RunConfig) -> RunConfig:
    """The run's config with the spike guard off: it would skip exactly the rising losses the test looks for."""
    return config.with_overrides(["guard.spike_zscore=null"])


def find_lr(built: Assembly, settings: LRFindConfig) -> tuple[Sweep, Suggestion]:
    """Sweep on this run (its state is restored afterwards) and suggest an LR."""
    sweep = range_test(built, settings)
    if len(sweep.lrs) < 2:
        raise ConfigError("lr_find.min_lr", settings.min_lr,
                          f"an LR low enough for the first updates to train (the sweep stopped after "
                          f"{len(sweep.lrs)}: {sweep.stop_reason}); if it is already tiny, run mode=doctor")
    return sweep, suggest_lr(sweep.lrs, sweep.losses, settings.window)


def run_lr_find(config: RunConfig, run_dir: Path, device: torch.device) -> float:
    """mode=lr_find: writes RUN_DIR/lr_find.json and lr_find.png; returns the suggested LR."""
    settings = config.lr_find
    built = assemble(sweep_config(config), run_dir, device, resume_from=None)
    accept_command()
    try:
        sweep, suggestion = find_lr(built, settings)
    finally:
        built.close()
    write_json(as_json(sweep, suggestion, settings), run_dir / "lr_find.json")
    plot(sweep, suggestion, run_dir / "lr_find.png")
    log.info(summary_line(suggestion, sweep))
    log.info("lr_find: plot %s, data %s", run_dir / "lr_find.png", run_dir / "lr_find.json")
    return suggestion.lr
