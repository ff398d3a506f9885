"""The harness against nanoGPT's own train.py, as users run them: whole processes, same recipe, same data.

nanoGPT's README "baby" recipe (4 layers, 4 heads, 128 wide, block 64, batch 12, AdamW lr 1e-3,
beta2 0.99, warmup 100, cosine to 1e-4, clip 1.0, dropout 0) runs as nanoGPT's `train.py` and as
`train.py experiment=baby_gpt data=tokens` on one character corpus written in nanoGPT's layout
(train.bin, val.bin, meta.pkl; the harness's default stdlib corpus unless --text is given). Rounds
interleave the two, alternating which goes first, at the machine's default thread count and at one
thread. Printed per setting: the median step time (each tool's own per-step timing: nanoGPT's
`time ...ms` lines, the harness's perf/step_time_ms windows), the median whole-process wall, the
last val loss of each, and the ratios harness / nanoGPT.

nanoGPT is the yardstick, not a dependency: pass a checkout with --nanogpt, or the pinned commit is
cloned into ~/.cache/stable-harness/ (that needs git and network access).

    python -m bench.vs_nanogpt --nanogpt ~/src/nanoGPT            # 3 rounds of 300 steps
    python -m bench.vs_nanogpt --nanogpt ~/src/nanoGPT --steps 2000 --rounds 1 --threads 0
"""
from __future__ import annotations

import argparse
import json
import os
import pickle
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.data.chars import encode_chars, split
from harness.core.metric_names import PERF_STEP_MS

ROOT = Path(__file__).resolve().parent.parent

NANOGPT_URL = "https://github.com/karpathy/nanoGPT"
NANOGPT_COMMIT = "3adf61e154c3fe3fca428ad6bc3818b27a3b8291"
NANOGPT_FILES = ("train.py", "model.py", "configurator.py")
DATASET = "bench_chars"
GOAL_RATIO, GOAL_LOSS_GAP = 1.0, 0.02
STEP_LINE = re.compile(r"^iter (\d+): loss [\d.]+, time ([\d.]+)ms")
VAL_LINE = re.compile(r"^step (\d+): train loss [\d.]+, val loss ([\d.]+)")


def nanogpt_checkout(path: Path | None) -> Path:
    if path is not None:
        missing = [f for f in NANOGPT_FILES if not (path / f).is_file()]
        if missing:
            sys.exit(f"error: --nanogpt={path} is invalid: a nanoGPT checkout; it lacks {', '.join(missing)}")
        return path
    cached = Path.home() / ".cache" / "stable-harness" / f"nanoGPT-{NANOGPT_COMMIT[:12]}"
    if not (cached / "train.py").is_file():
        cached.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=cached.parent, prefix=".nanoGPT-"))
        for command in (["git", "clone", "-q", NANOGPT_URL, str(staging)],
                        ["git", "-C", str(staging), "checkout", "-q", NANOGPT_COMMIT]):
            if subprocess.run(command, capture_output=True).returncode != 0:
                shutil.rmtree(staging, ignore_errors=True)
                sys.exit(f"error: could not fetch nanoGPT ({' '.join(command[:3])} failed); "
                         f"pass a checkout with --nanogpt PATH (commit {NANOGPT_COMMIT[:12]})")
        staging.rename(cached)
    return cached


def corpus_ids(text_file: Path | None) -> tuple[np.ndarray, int]:
    """Character ids of --text, or of the harness's default stdlib corpus, and the vocabulary size."""
    if text_file is not None:
        ids, vocab = encode_chars(text_file.read_text(encoding="utf-8"))
        return ids, len(vocab)
    from hydra import compose, initialize_config_dir

    from harness.data import build_data, validate_data_config
    from harness.entry.resolvers import register_resolvers

    register_resolvers()
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):  # the real conf/
        data = validate_data_config(compose(config_name="train", overrides=["data=stdlib"]).data)
    train, val, meta = build_data(data)
    return np.concatenate([np.asarray(train.tokens), np.asarray(val.tokens)]), meta.vocab_size


def write_dataset(work: Path, ids: np.ndarray, vocab_size: int) -> Path:
    """nanoGPT's data/<dataset>/ layout, which the harness reads as data=tokens too."""
    data_dir = work / "data" / DATASET
    data_dir.mkdir(parents=True)
    train, val = split(ids, 0.1)
    train.astype(np.uint16).tofile(data_dir / "train.bin")
    val.astype(np.uint16).tofile(data_dir / "val.bin")
    with open(data_dir / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": vocab_size}, f)
    (data_dir / "meta.json").write_text(json.dumps({"vocab_size": vocab_size}))
    return data_dir


def nanogpt_command(steps: int, out_dir: Path) -> list[str]:
    recipe = dict(dataset=DATASET, device="cpu", compile=False, dtype="float32", eval_iters=20, eval_interval=250,
                  log_interval=1, block_size=64, batch_size=12, gradient_accumulation_steps=1, n_layer=4,
                  n_head=4, n_embd=128, dropout=0.0, learning_rate=1e-3, max_iters=steps, lr_decay_iters=steps,
                  min_lr=1e-4, beta2=0.99, warmup_iters=100, always_save_checkpoint=False, out_dir=str(out_dir))
    return [sys.executable, "train.py", *(f"--{k}={v}" for k, v in recipe.items())]


def harness_command(steps: int, data_dir: Path, run_dir: Path) -> list[str]:
    return [sys.executable, str(ROOT / "train.py"), "experiment=baby_gpt", "data=tokens", f"data.dir={data_dir}",
            f"trainer.max_steps={steps}", f"hydra.run.dir={run_dir}"]


def timed(command: list[str], cwd: Path, threads: int) -> tuple[float, str]:
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[:3])} ... failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def nanogpt_result(stdout: str) -> tuple[float, float]:
    """(median step ms after the first 5 iterations, last val loss) from nanoGPT's output."""
    steps = [float(m[2]) for m in map(STEP_LINE.match, stdout.splitlines()) if m and int(m[1]) >= 5]
    vals = [float(m[2]) for m in map(VAL_LINE.match, stdout.splitlines()) if m]
    return statistics.median(steps), vals[-1]


def harness_result(run_dir: Path) -> tuple[float, float]:
    """(median of the logged windows' step time, last val loss) from the run's files."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [r[PERF_STEP_MS] for r in rows if PERF_STEP_MS in r]
    return statistics.median(steps), json.loads((run_dir / "summary.json").read_text())["final_val_loss"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nanogpt", type=Path, default=None, help="a nanoGPT checkout (default: the pinned commit)")
    parser.add_argument("--text", type=Path, default=None, help="a UTF-8 text file (default: the stdlib corpus)")
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps per run (the recipe's: 2000)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per thread setting")
    parser.add_argument("--threads", type=int, nargs="+", default=[0, 1],
                        help="OMP_NUM_THREADS per setting; 0: the machine's default")
    args = parser.parse_args()
    source = nanogpt_checkout(args.nanogpt)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name in NANOGPT_FILES:
            shutil.copy(source / name, work / name)  # nanoGPT reads configurator.py and data/ from its cwd
        data_dir = write_dataset(work, *corpus_ids(args.text))
        for threads in args.threads:
            results: dict[str, list[tuple[float, float, float]]] = {"nanoGPT": [], "harness": []}
            for r in range(args.rounds):
                order = ["nanoGPT", "harness"] if r % 2 == 0 else ["harness", "nanoGPT"]
                for tool in order:
                    out = work / f"{tool}-{threads}-{r}"
                    if tool == "nanoGPT":
                        wall, stdout = timed(nanogpt_command(args.steps, out), work, threads)
                        results[tool].append((*nanogpt_result(stdout), wall))
                    else:
                        wall, _ = timed(harness_command(args.steps, data_dir, out), ROOT, threads)
                        results[tool].append((*harness_result(out), wall))
                    print(f"  threads={threads or 'default'} round {r + 1} {tool}: "
                          f"{results[tool][-1][0]:.1f} ms/step, val {results[tool][-1][1]:.4f}, "
                          f"{wall:.1f} s", file=sys.stderr)
            medians = {tool: [statistics.median(v[i] for v in runs) for i in range(3)]
                       for tool, runs in results.items()}
            rows.append((threads, medians))
    print("| threads | tool | step (ms) | process wall (s) | last val loss |\n|---|---|---|---|---|")
    verdicts = []
    for threads, medians in rows:
        for tool, (step, val, wall) in medians.items():
            print(f"| {threads or 'default'} | {tool} | {step:.1f} | {wall:.1f} | {val:.4f} |")
        (n_step, n_val, n_wall), (h_step, h_val, h_wall) = medians["nanoGPT"], medians["harness"]
        ok = h_step / n_step <= GOAL_RATIO and abs(h_val - n_val) <= GOAL_LOSS_GAP
        verdicts.append(f"threads={threads or 'default'}: step {h_step / n_step:.2f}x, wall {h_wall / n_wall:.2f}x, "
                        f"val loss {h_val - n_val:+.3f} ({'met' if ok else 'NOT met'})")
    print(f"\n{args.steps} steps, {args.rounds} rounds, medians; harness / nanoGPT "
          f"(goal: step <= {GOAL_RATIO:.1f}x, |val gap| <= {GOAL_LOSS_GAP}):")
    print("\n".join(verdicts))


if __name__ == "__main__":
    main()
