"""Step-time overhead of the harness against a raw nanoGPT-style loop, measured side by side.

Every variant trains the same model on the same data in this one process; variants run in
interleaved blocks (round-robin), and per-step medians over all blocks are compared, so machine
noise hits every variant alike. Prints ratios to the raw loop.

It pins torch to one thread (--threads 1) so the variants' ratios stay steady when other work
shares the cores. That makes it blind to costs that only show at the default thread count or
across a whole process (a side thread's OpenMP team throttling the training thread's cost ~40% of
a step that this benchmark could not see): bench/vs_nanogpt.py measures those, as whole
processes against nanoGPT's own train.py.

    python -m bench.overhead                 # baby GPT and a small MLP
    python -m bench.overhead --rounds 8 --block 20
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from hydra import compose, initialize_config_dir

from harness.assembly.assemble import Assembly, assemble
from harness.config.run_config import validate_config

CONF = Path(__file__).resolve().parent.parent / "conf"
WORKLOADS = {
    "baby_gpt": ["experiment=baby_gpt", "trainer.max_steps=100000"],
    # ~5 ms steps on 2 cores, the size DESIGN.md's cost yardsticks were measured on
    "mlp": ["model=mlp", "data=synthetic", "batch_size=256", "model.width=512", "model.depth=4",
            "data.in_features=128", "trainer.max_steps=100000"],
}
UNFUSED = ["optim.fused=false"]  # torch's per-tensor AdamW: the guard reads its verdict once per update
VARIANTS = {
    "harness, guard+monitors off": ["guard=off", "monitor=off", "trainer.log_every=1000"],
    "harness, defaults (guard, basic, log 25)": ["trainer.log_every=25"],
    "harness, defaults, unfused AdamW": [*UNFUSED, "trainer.log_every=25"],
    "harness, full monitors, log every 1000": ["monitor=full", "monitor.every=1", "trainer.log_every=1000"],
    "harness, no monitors, log every step": ["monitor=off", "trainer.log_every=1"],
    "harness, full monitors, log every step": ["monitor=full", "trainer.log_every=1"],
    "harness, full monitors collected every step": ["monitor=full", "monitor.every=1", "trainer.log_every=1"],
}


def make_run(overrides: list[str], tmp: Path) -> Assembly:
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="train", overrides=[*overrides, "logger=none", "diagnose=false"])
    return assemble(validate_config(cfg), tmp, torch.device("cpu"), resume_from=None, console=False)  # the console stays out of the timing


def harness_step(trainer) -> None:
    """What Trainer.fit does per step, minus eval and checkpoints."""
    trainer.advance()


def raw_step_fn(built: Assembly):
    """nanoGPT's loop on the harness's own model, optimizer and data: the floor to compare against."""
    model, opt, sched, data = built.raw_model, built.optimizer, built.live_lr.scheduler, built.train_set
    stream, loss_fn, clip = built.trainer.batches.stream, built.objective.loss_fn, built.train_step.clip.threshold

    def step() -> None:
        x, y = data.gather(stream.next_batch())
        loss = loss_fn(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    return step


def bench(workload: str, rounds: int, block: int, warmup: int) -> None:
    tmp = Path(tempfile.mkdtemp())
    steps = {"raw loop": raw_step_fn(make_run(WORKLOADS[workload], tmp / "raw")),
             "raw loop, unfused AdamW": raw_step_fn(make_run([*WORKLOADS[workload], *UNFUSED], tmp / "raw_unfused"))}
    for i, (name, extra) in enumerate(VARIANTS.items()):
        trainer = make_run([*WORKLOADS[workload], *extra], tmp / str(i)).trainer
        steps[name] = lambda t=trainer: harness_step(t)
    times: dict[str, list[float]] = {name: [] for name in steps}
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    for _ in range(rounds):
        for name, fn in steps.items():
            for _ in range(block):
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
    base = statistics.median(times["raw loop"])
    print(f"\n{workload}: {rounds} rounds x {block} steps per variant, interleaved; torch threads {torch.get_num_threads()}")
    print(f"{'variant':44s} {'median ms':>10s} {'ratio to raw':>13s}")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:44s} {1000 * med:10.2f} {med / base:13.3f}")
    plain = statistics.median(times["harness, no monitors, log every step"])
    full = statistics.mean(times["harness, full monitors, log every step"])  # mean: collections are rare spikes
    every = statistics.median(times["harness, full monitors collected every step"])
    print(f"full monitors at log interval 1 (default cadence, monitor.every=100): {full / plain:.3f}x the loop without them")
    print(f"one full collection costs {every / plain - 1:.1%} of a step")
    fused = statistics.median(times["harness, defaults (guard, basic, log 25)"])
    unfused = statistics.median(times["harness, defaults, unfused AdamW"])
    print(f"harness defaults with fused AdamW (the guard skips on the device) take {fused / unfused:.3f}x "
          f"the step with unfused AdamW (the guard reads its verdict every update)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--block", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; 1 keeps the comparison steady when other work shares the cores")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for workload in args.workloads:
        bench(workload, args.rounds, args.block, args.warmup)


if __name__ == "__main__":
    main()
