"""A single run (no -m) whose launcher runs it somewhere else: `hydra/launcher=slurm` makes it one
SLURM job. Hydra consults a launcher only in multirun mode, so train.py asks here first. The
launcher's class, named by the config's `hydra.launcher._target_`, decides: one with a
`submit_single_run(cfg) -> exit status` method takes the run; any other leaves it to this process.
"""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig


def launched_elsewhere(cfg: DictConfig) -> int | None:
    """The exit status of the run its launcher took elsewhere, or None: train here."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from hydra.utils import get_class

    hydra_cfg = HydraConfig.get()
    target = hydra_cfg.launcher.get("_target_")
    if hydra_cfg.mode != RunMode.RUN or not target:
        return None
    submit: Any = getattr(get_class(str(target)), "submit_single_run", None)
    return None if submit is None else int(submit(cfg))
