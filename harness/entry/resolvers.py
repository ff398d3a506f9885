"""OmegaConf resolvers for run directories that every torchrun rank agrees on.

Each rank composes the config on its own, so `${now:...}` can differ between ranks and split
one run into two directories. Under torchrun the run id (TORCHELASTIC_RUN_ID, shared by all
ranks) names the directory instead; only rank 0 writes `.hydra/`, and each rank logs to its
own file.
"""
from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

from omegaconf import OmegaConf


STAMP = "%Y-%m-%d/%H-%M-%S"
# `torchrun --standalone` draws a random run id (a UUID): one node, whose ranks share one agent
UUID = re.compile(r"^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")


def run_stamp() -> str:
    """The run dir's name: when the run started, as for any run. Under `torchrun --standalone` that
    is when its agent (every rank's parent) started, which all ranks read alike; under a named
    rendezvous (several nodes, several agents) the id the user chose: `torchrun/<id>`."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID")
    if run_id and "WORLD_SIZE" in os.environ:
        started = agent_start() if UUID.match(run_id) else None
        return started.strftime(STAMP) if started else f"torchrun/{run_id}"
    return datetime.now().strftime(STAMP)


def agent_start() -> datetime | None:
    """When this process's parent started (Linux's /proc); None where that cannot be read."""
    try:
        fields = Path(f"/proc/{os.getppid()}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime"))
    except (OSError, StopIteration, IndexError, ValueError):
        return None
    ticks = int(fields[19])  # starttime, the 22nd field: clock ticks after boot
    return datetime.fromtimestamp(boot + ticks / os.sysconf("SC_CLK_TCK"))


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
