"""Turn a sharded checkpoint (a parallel=fsdp run's .dcp directory) into one ordinary file that
`torch.load` reads without torch.distributed:

    python scripts/export_checkpoint.py outputs/exp1/checkpoints/best.dcp best_model.pt
    python scripts/export_checkpoint.py outputs/exp1/checkpoints/step_00000400.dcp step400.pt --with-optimizer

The file holds {"model": the whole state dict, "step", "config"} (and "optimizer", keyed by
parameter name, with --with-optimizer): `model.load_state_dict(torch.load(path)["model"])`.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from harness.state.checkpoint import atomic_torch_save, is_sharded_checkpoint, load_checkpoint
from harness.entry.cli import fail
from harness.core.errors import ConfigError


def export(source: Path, rest: dict, target: Path, with_optimizer: bool) -> dict:
    """`source`'s tensors, whole, with `rest` (its unsharded state: the step and the config)."""
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory() as tmp:
        whole = Path(tmp) / "whole.pt"
        dcp_to_torch_save(source, whole)
        tensors = torch.load(whole, weights_only=False)
    exported = {"model": tensors["model"], "step": rest["step"], "config": rest.get("config")}
    if with_optimizer:
        exported["optimizer"] = tensors["optimizer"]
    atomic_torch_save(exported, target)
    return exported


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a .dcp checkpoint directory (best.dcp, step_NNNNNNNN.dcp)")
    parser.add_argument("out", type=Path, help="the file to write")
    parser.add_argument("--with-optimizer", action="store_true", help="also the optimizer state")
    args = parser.parse_args(argv)
    source = args.checkpoint.resolve()
    refused = ConfigError("checkpoint", str(args.checkpoint), "a finished .dcp checkpoint directory of a "
                                                               "parallel=fsdp run (it holds .metadata and state.pt)")
    if args.out.exists():
        fail(ConfigError("out", str(args.out), "a path that does not exist yet (nothing is overwritten)"))
    if not is_sharded_checkpoint(source):
        fail(refused)
    try:
        rest = load_checkpoint(source)
    except OSError:  # no .metadata or no state.pt: a write that a kill interrupted
        fail(refused)
    exported = export(source, rest, args.out, args.with_optimizer)
    n = sum(t.numel() for t in exported["model"].values())
    print(f"{args.out}: {len(exported['model'])} tensors, {n / 1e6:.2f}M parameters, step {exported['step']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
