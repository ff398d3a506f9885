"""How wide a range of learning rates trains well: a small GPT over an LR grid under three settings.

bare      no warmup, no clipping, no guard, no QK-norm, no z-loss
defaults  the shipped defaults (warmup 10%, clip 1.0, guard on)
stable    experiment=stable (defaults + QK-norm + z-loss, warmup 5%)

For each setting it prints the best final val loss over the grid, the width in decades of the
LR range around the best LR whose loss is within 10% of it, and the largest LR in that range.
Every run is its own short training in this process (same data, seed and model).

    python -m bench.lr_sensitivity                       # 300 steps, 8 LRs from 1e-4 to 3e-1
    python -m bench.lr_sensitivity --steps 100 --lrs 1e-3 1e-2
"""
from __future__ import annotations

import argparse
import json
import math
import tempfile
from pathlib import Path

import torch

from hydra import compose, initialize_config_dir

from harness.modes.run import run

CONF = Path(__file__).resolve().parent.parent / "conf"
GRID = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1]
WITHIN = 0.10  # "trains well": a final val loss within 10% of the setting's best
MODEL = ["model.n_layer=2", "model.n_head=2", "model.n_embd=64", "model.block_size=64", "batch_size=16"]
SETTINGS = {
    "bare": ["schedule.warmup=0", "clip=null", "guard=off", "model.qk_norm=false", "loss.z_loss=0"],
    "defaults": [],
    "stable": ["experiment=stable"],
}


def final_val_loss(setting: list[str], lr: float, steps: int, run_dir: Path) -> float:
    overrides = [*setting, *MODEL, f"optim.lr={lr}", f"trainer.max_steps={steps}", f"trainer.eval_every={steps}",
                 "trainer.eval_batches=10", f"trainer.ckpt_every={steps}", "logger=none", "diagnose=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    run(cfg, run_dir=run_dir)
    value = json.loads((run_dir / "summary.json").read_text())["final_val_loss"]
    return math.inf if value is None else float(value)


def good_range(losses: dict[float, float]) -> tuple[float, float, float]:
    """(best loss, width in decades, largest LR) of the contiguous grid range around the best LR
    whose losses are within WITHIN of the best."""
    lrs = sorted(losses)
    best_i = min(range(len(lrs)), key=lambda i: losses[lrs[i]])
    best = losses[lrs[best_i]]
    ok = [losses[lr] <= (1 + WITHIN) * best for lr in lrs]
    lo = hi = best_i
    while lo > 0 and ok[lo - 1]:
        lo -= 1
    while hi < len(lrs) - 1 and ok[hi + 1]:
        hi += 1
    return best, math.log10(lrs[hi] / lrs[lo]), lrs[hi]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--lrs", type=float, nargs="+", default=GRID)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    args = parser.parse_args()
    torch.set_num_threads(2)
    results: dict[str, dict[float, float]] = {name: {} for name in args.settings}
    with tempfile.TemporaryDirectory() as tmp:
        for lr in args.lrs:  # interleaved: each LR under every setting before the next LR
            for name in args.settings:
                loss = final_val_loss(SETTINGS[name], lr, args.steps, Path(tmp) / f"{name}-{lr:g}")
                results[name][lr] = loss
                print(f"  {name:9s} lr {lr:<8g} final val loss {loss:.4f}", flush=True)
    print(f"\nsmall GPT (2 layers, 64 wide), {args.steps} steps, final val loss per LR:\n")
    print("| LR | " + " | ".join(args.settings) + " |\n|---|" + "---|" * len(args.settings))
    for lr in args.lrs:
        print(f"| {lr:g} | " + " | ".join(f"{results[name][lr]:.3f}" for name in args.settings) + " |")
    print("\n| setting | best val loss | LR range within 10% (decades) | largest LR within 10% |\n|---|---|---|---|")
    for name in args.settings:
        best, width, largest = good_range(results[name])
        print(f"| {name} | {best:.3f} | {width:.1f} | {largest:g} |")


if __name__ == "__main__":
    main()
