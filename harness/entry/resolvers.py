"""OmegaConf resolvers for run directories that every torchrun rank agrees on.

Each rank composes the config on its own, so `${now:...}` can differ between ranks and split
one run into two directories. Under torchrun the run id (TORCHELASTIC_RUN_ID, shared by all
ranks) names the directory instead; only rank 0 writes `.hydra/`, and each rank logs to its
own file.
"""
from __future__ import annotations

import os
from datetime import datetime

from omegaconf import OmegaConf


def run_stamp() -> str:
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if run_id and "WORLD_SIZE" in os.environ:
        return f"torchrun/{run_id}"
    return datetime.now().strftime("%Y-%m-%d/%H-%M-%S")


def rank_zero_only(value: str) -> str | None:
    return value if int(os.environ.get("RANK", 0)) == 0 else None


def rank_suffix() -> str:
    rank = int(os.environ.get("RANK", 0))
    return f"_rank{rank}" if rank else ""


def console_level() -> str:
    """The console's log level: rank 0 speaks for the run under torchrun; every rank's file keeps
    its own lines (train_rank1.log, ...)."""
    return "INFO" if int(os.environ.get("RANK", 0)) == 0 else "CRITICAL"


def register_resolvers() -> None:
    for name, fn in (("run_stamp", run_stamp), ("rank_zero_only", rank_zero_only), ("rank_suffix", rank_suffix),
                     ("console_level", console_level)):
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, fn)
