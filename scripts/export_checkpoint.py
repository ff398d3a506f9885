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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.checkpoint import SHARDED_STATE, atomic_torch_save, load_checkpoint  # noqa: E402
from harness.cli import fail  # noqa: E402
from harness.errors import ConfigError  # noqa: E402


def export(source: Path, target: Path, with_optimizer: bool) -> dict:
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    rest = load_checkpoint(source)  # checks that it is a finished sharded checkpoint
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
    if not (source.is_dir() and (source / ".metadata").is_file() and (source / SHARDED_STATE).is_file()):
        fail(ConfigError("checkpoint", str(args.checkpoint), "a finished .dcp checkpoint directory of a parallel=fsdp "
                                                             "run (it holds .metadata and state.pt)"))
    if args.out.exists():
        fail(ConfigError("out", str(args.out), "a path that does not exist yet (nothing is overwritten)"))
    exported = export(source, args.out, args.with_optimizer)
    n = sum(t.numel() for t in exported["model"].values())
    print(f"{args.out}: {len(exported['model'])} tensors, {n / 1e6:.2f}M parameters, step {exported['step']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
