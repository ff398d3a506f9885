"""ms/step of the DataLoader seam against the harness's previous in-process gathering, side by side.

1. The default GPT run: batches gathered in-process exactly as before the DataLoader seam
   (`dataset.gather(indices)` in the training loop) vs the DataLoader path with 0 and 2 workers.
2. A user image-like Dataset whose __getitem__ costs ~1 ms of CPU (a 3x32x32 image blurred in
   numpy): DataLoader workers 0 vs 2.

Variants run in interleaved blocks in this one process; per-step medians are compared.

    python -m bench.dataloader
    python -m bench.dataloader --rounds 8 --block 20
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from bench.overhead import make_run

GPT = ["trainer.max_steps=100000"]
IMAGES = ["data=custom", "data._target_=bench.dataloader.costly_images", "model._target_=bench.dataloader.ConvNet",
          "batch_size=32", "trainer.max_steps=100000"]
WORKLOADS = {
    "default GPT": {"in-process gather (before)": (GPT, True), "DataLoader, 0 workers": (GPT, False),
                    "DataLoader, 2 workers": ([*GPT, "data.num_workers=2"], False)},
    "1 ms/sample images": {"DataLoader, 0 workers": (IMAGES, False),
                           "DataLoader, 2 workers": ([*IMAGES, "data.num_workers=2"], False)},
}


class CostlyImages(Dataset):
    """Random 3x32x32 images, each blurred by a 5x5 box filter on read: ~1 ms of CPU per sample."""

    classes = list(range(10))

    def __init__(self, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.images = rng.standard_normal((n, 3, 40, 40)).astype(np.float32)
        self.labels = rng.integers(0, 10, n)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[np.ndarray, int]:
        image = self.images[i]
        out = np.zeros((3, 32, 32), dtype=np.float32)
        for _ in range(12):
            for dy in range(5):
                for dx in range(5):
                    out += image[:, dy : dy + 32, dx : dx + 32]
        return out / 100, int(self.labels[i])


def costly_images() -> tuple[Dataset, Dataset]:
    return CostlyImages(2048, 0), CostlyImages(256, 1)


class ConvNet(nn.Module):
    def __init__(self, input_shape: tuple[int, ...], num_classes: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(input_shape[0], 16, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                                 nn.Flatten(), nn.Linear(16 * 16, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class GatherInProcess:
    """The run's batch order, read as the loop once read it: one indexing operation, no DataLoader."""

    def __init__(self, built) -> None:
        self.batches, self.data = built.trainer.batches, built.train_set

    def next_update(self):
        return self.batches.next_update()

    def fetch(self, mb):
        return self.data.gather(mb.indices)


def step_fn(overrides: list[str], gather_in_process: bool, tmp: Path):
    built = make_run(overrides, tmp)
    source = GatherInProcess(built) if gather_in_process else None
    return lambda: built.trainer.advance(source)


def time_step_sample(fn, block: int) -> list[float]:
    times = []
    for _ in range(block):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def bench(workload: str, rounds: int, block: int, warmup: int) -> None:
    tmp = Path(tempfile.mkdtemp())
    steps = {name: step_fn(overrides, before, tmp / str(i))
             for i, (name, (overrides, before)) in enumerate(WORKLOADS[workload].items())}
    for fn in steps.values():
        time_step_sample(fn, warmup)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            times[name] += time_step_sample(fn, block)
    base_name = next(iter(steps))
    base = statistics.median(times[base_name])
    print(f"\n{workload}: {rounds} rounds x {block} steps per variant, interleaved; torch threads {torch.get_num_threads()}")
    print(f"{'variant':30s} {'median ms/step':>15s} {'ratio to first':>15s}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:30s} {1000 * med:15.2f} {med / base:15.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--block", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for workload in WORKLOADS:
        bench(workload, args.rounds, args.block, args.warmup)


if __name__ == "__main__":
    main()
