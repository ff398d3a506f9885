"""Rebuild, from Hydra's config of the sweep, the command that starts one run of the same app."""
from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig

from harness.launch.runner import AppCommand

# Hydra overrides that configure the sweep itself; a trial is a plain single run.
SWEEP_ONLY = (
    "hydra/sweeper", "hydra.sweeper", "hydra/launcher", "hydra.launcher",
    "hydra.sweep.", "hydra.run.", "hydra.mode", "hydra.job.num", "hydra.job.id",
)


def app_command(cfg: DictConfig) -> AppCommand:
    hydra_cfg = cfg.hydra
    cwd = str(hydra_cfg.runtime.cwd)
    args: list[str] = []
    for source in hydra_cfg.runtime.config_sources:
        if source.schema != "file":
            continue
        if source.provider == "main":
            args.append(f"--config-path={source.path}")
        elif source.provider == "command-line":
            args.append(f"--config-dir={source.path}")
    if hydra_cfg.job.config_name:
        args.append(f"--config-name={hydra_cfg.job.config_name}")
    forwarded = [o for o in hydra_cfg.overrides.hydra if not o.lstrip("+~").startswith(SWEEP_ONLY)]
    # Explicit, so a primary config that sets hydra.mode=MULTIRUN cannot make trials sweep.
    args += [*forwarded, "hydra.mode=RUN"]
    return AppCommand(python=sys.executable, entry=_entry(cwd), args=tuple(args), cwd=cwd)


def _entry(cwd: str) -> tuple[str, ...]:
    """`python -m pkg.app` must be restarted as a module (its relative imports need it)."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    if spec is not None and spec.name:
        return ("-m", spec.name.removesuffix(".__main__"))
    return (str(Path(cwd, sys.argv[0]).resolve()),)
