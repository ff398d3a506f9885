"""Start-up time and memory of `data=tokens` as the corpus grows, and the cost of an epoch boundary.

For each size, random uint16 token ids are written to DIR/train.bin (and 5% as much to val.bin,
nanoGPT's layout), then `train.py data=tokens debug=smoke trainer.max_steps=2` runs as a fresh
process: its wall time and peak resident memory (the kernel's high-water mark for that process,
file pages of the memmap included) are printed beside the smallest size's. The files sit in the
OS file cache, as after any first read. The epoch boundary is timed in this process: the batch
that starts the second epoch of a stream over the same number of samples.

    python -m bench.data_scale                      # 1M, 20M, 100M, 400M, 1B tokens
    python -m bench.data_scale --sizes 1e6 1e8 --dir /mnt/scratch
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from harness.data.sampler import BatchStream

ROOT = Path(__file__).resolve().parent.parent

VOCAB = 4096
BLOCK = 64
WRITE_CHUNK = 50_000_000  # tokens generated and written at a time
GOAL_EXTRA_S, GOAL_EXTRA_GB = 5.0, 0.5  # the largest size against the smallest


def write_tokens(path: Path, count: int, rng: np.random.Generator) -> None:
    with open(path, "wb") as f:
        for start in range(0, count, WRITE_CHUNK):
            rng.integers(0, VOCAB, size=min(WRITE_CHUNK, count - start), dtype=np.uint16).tofile(f)


def make_corpus(root: Path, tokens: int) -> None:
    root.mkdir(parents=True)
    rng = np.random.default_rng(0)
    write_tokens(root / "train.bin", tokens, rng)
    write_tokens(root / "val.bin", max(tokens // 20, 10 * BLOCK), rng)
    (root / "meta.json").write_text(json.dumps({"vocab_size": VOCAB}))


def run_smoke(data_dir: Path, run_dir: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in GB) of a 2-step run in a fresh process."""
    command = [sys.executable, "train.py", "data=tokens", f"data.dir={data_dir}", f"model.block_size={BLOCK}",
               "debug=smoke", "trainer.max_steps=2", "logger=none", "diagnose.report=false",
               f"hydra.run.dir={run_dir}"]
    started = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    stderr = proc.stderr.read()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command)} failed:\n{stderr[-2000:]}")
    return seconds, usage.ru_maxrss * 1024 / 1e9  # ru_maxrss is in KiB on Linux


def epoch_boundary_ms(samples: int, batch: int = 8) -> float:
    stream = BatchStream(samples, batch, seed=1337)
    stream.load_state_dict({"epoch": 0, "offset": samples - batch})
    stream.next_batch()  # the last batch of epoch 0
    started = time.perf_counter()
    stream.next_batch()  # the first of epoch 1
    return 1000 * (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e6, 2e7, 1e8, 4e8, 1e9],
                        help="training tokens per corpus")
    parser.add_argument("--dir", type=Path, default=None, help="where the corpora are written (removed after)")
    args = parser.parse_args()
    sizes = sorted(int(s) for s in args.sizes)
    rows = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for tokens in sizes:
            corpus = Path(tmp) / f"tokens_{tokens}"
            make_corpus(corpus, tokens)
            wall, rss = run_smoke(corpus, Path(tmp) / f"run_{tokens}")
            rows.append((tokens, wall, rss, epoch_boundary_ms(tokens - BLOCK)))
            for name in ("train.bin", "val.bin"):
                (corpus / name).unlink()  # one corpus on disk at a time
            print(f"  {tokens:,} tokens: {wall:.2f} s, {rss:.2f} GB", file=sys.stderr)
    print("| tokens | start-up wall (s) | peak RSS (GB) | first epoch boundary (ms) |\n|---|---|---|---|")
    for tokens, wall, rss, boundary in rows:
        print(f"| {tokens:,} | {wall:.2f} | {rss:.2f} | {boundary:.2f} |")
    (small, small_wall, small_rss, _), (large, large_wall, large_rss, _) = rows[0], rows[-1]
    extra_s, extra_gb = large_wall - small_wall, large_rss - small_rss
    verdict = "met" if extra_s < GOAL_EXTRA_S and extra_gb < GOAL_EXTRA_GB else "NOT met"
    print(f"\n{large:,} tokens against {small:,}: +{extra_s:.2f} s, +{extra_gb:.2f} GB "
          f"(goal < {GOAL_EXTRA_S:.0f} s and < {GOAL_EXTRA_GB} GB: {verdict}); "
          f"this process's peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    main()
