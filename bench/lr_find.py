"""Does the LR finder point where training works best? The finder's suggestion against a small LR grid.

Runs `mode=lr_find` on the baby GPT (for a few seeds, to show how far noise moves the
suggestion), then trains the same recipe shortened to `--steps` updates at each grid LR and
compares validation losses. The issue's bar: the suggestion lies within 3x of the grid's best LR.

    python -m bench.lr_find                       # ~3-6 min on 2 cores
    python -m bench.lr_find --steps 150 --seeds 1337
"""
from __future__ import annotations

import argparse
import logging
import math
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from harness.modes.run import run

CONF = Path(__file__).resolve().parent.parent / "conf"
RECIPE = ["experiment=baby_gpt", "logger=none", "diagnose=false"]
TOLERANCE = 3.0  # the acceptance bar: suggestion within 3x of the grid's best LR


def compose_cfg(overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="train", overrides=[*RECIPE, *overrides])


def finder(seed: int, tmp: Path) -> tuple[float, float]:
    started = time.perf_counter()
    lr = run(compose_cfg(["mode=lr_find", f"seed={seed}"]), run_dir=tmp / f"lr_find_{seed}")
    return lr, time.perf_counter() - started


def grid_point(lr: float, steps: int, tmp: Path) -> tuple[float, float]:
    """Final val loss of the baby GPT recipe cut to `steps` updates (warmup 10% of them) at this LR."""
    started = time.perf_counter()
    overrides = [f"optim.lr={lr}", f"trainer.max_steps={steps}", f"schedule.warmup={max(1, steps // 10)}",
                 f"trainer.eval_every={steps}", f"trainer.ckpt_every={steps}", "trainer.log_every=50"]
    val = run(compose_cfg(overrides), run_dir=tmp / f"grid_{lr:g}")
    return val, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", type=float, nargs="+", default=[3e-4, 1e-3, 3e-3, 1e-2])
    parser.add_argument("--steps", type=int, default=300, help="updates per grid run")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1337, 1, 2], help="finder runs")
    args = parser.parse_args()
    logging.getLogger("harness").setLevel(logging.WARNING)

    with tempfile.TemporaryDirectory() as tmp:
        suggestions = []
        for seed in args.seeds:
            lr, seconds = finder(seed, Path(tmp))
            suggestions.append(lr)
            print(f"finder  seed {seed:>5}: suggestion {lr:.2e}   ({seconds:.0f} s)", flush=True)
        results = {}
        for lr in args.grid:
            results[lr], seconds = grid_point(lr, args.steps, Path(tmp))
            print(f"grid    lr {lr:.1e}: val loss {results[lr]:.4f} after {args.steps} steps   ({seconds:.0f} s)",
                  flush=True)

    best = min(results, key=results.get)
    print(f"\nbest grid LR {best:.1e} (val loss {results[best]:.4f})")
    for seed, lr in zip(args.seeds, suggestions):
        ratio = math.exp(abs(math.log(lr / best)))
        verdict = "PASS" if ratio <= TOLERANCE else "FAIL"
        print(f"seed {seed:>5}: suggestion {lr:.2e} is {ratio:.2f}x from the best: {verdict} (bar: {TOLERANCE:g}x)")


if __name__ == "__main__":
    main()
