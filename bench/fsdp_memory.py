"""What does parallel=fsdp save per rank, and what does it cost per step? Two measurements:

1. Training-state bytes per rank (parameters + gradients + AdamW's two moments), counted from
   the tensors each rank actually holds (a DTensor's local shard), for DDP and FSDP at
   `--ranks` ranks: a small GPT after one real AdamW step, and a GPT-2-124M-sized GPT built
   on the meta device (no memory, no training: the moments are counted as AdamW allocates
   them, two fp32 tensors the shape of each local parameter shard).
2. ms/step of the small GPT under `python -m torch.distributed.run ... train.py parallel=X`,
   DDP and FSDP interleaved over `--rounds` rounds, medians (what users run, on CPU with gloo).

    python -m bench.fsdp_memory [--ranks 2] [--rounds 3] [--steps 60]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SMALL_GPT = {"vocab_size": 96, "block_size": 64, "n_layer": 4, "n_head": 4, "n_embd": 128}
GPT2_124M = {"vocab_size": 50257, "block_size": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768,
             "tie_embeddings": True}
TRAIN_GPT = ["model=gpt", "data=stdlib", "model.n_layer=4", "model.n_head=4", "model.n_embd=128",
             "model.block_size=64", "batch_size=16", "logger=none", "diagnose=false", "trainer.log_every=10",
             "trainer.eval_every=1000", "trainer.ckpt_every=1000"]


def local_bytes(tensors) -> int:
    from harness.core.shards import local

    return sum(local(t).numel() * local(t).element_size() for t in tensors)


def measure_bytes(parallel: str, sizes: dict, on_meta: bool) -> dict[str, int]:
    """This rank's parameter, gradient and optimizer-state bytes for a GPT of `sizes`."""
    import torch

    from harness.core.distributed import dist_info_from_env
    from harness.models.gpt import GPT, GPTConfig
    from harness.training.parallel import parallel_config, parallelize

    info = dist_info_from_env()
    torch.manual_seed(0)
    with torch.device("meta" if on_meta else "cpu"):
        model = GPT(GPTConfig(**sizes))
    if on_meta and parallel == "ddp":  # DDP keeps the whole model on every rank (and cannot broadcast meta tensors)
        wrapped = model
    else:
        wrapped = parallelize(model, parallel_config({"name": parallel}), "fp32", torch.device("cpu"), info)
    params = [p for p in model.parameters() if p.requires_grad]
    param_bytes = local_bytes(params)
    if on_meta:  # AdamW allocates exp_avg and exp_avg_sq like each parameter (shard), and the grads match it
        return {"params": param_bytes, "grads": param_bytes, "optimizer": 2 * param_bytes}
    optimizer = torch.optim.AdamW(params, lr=1e-3)
    x = torch.randint(0, sizes["vocab_size"], (4, sizes["block_size"]))
    logits = wrapped(x)
    torch.nn.functional.cross_entropy(logits.flatten(0, 1), x.flatten()).backward()
    optimizer.step()
    moments = [v for state in optimizer.state.values() for k, v in state.items() if k != "step"]
    return {"params": param_bytes, "grads": local_bytes([p.grad for p in params]), "optimizer": local_bytes(moments)}


def worker() -> None:
    """Under torchrun: every measurement on every rank; rank 0 prints the largest rank's bytes."""
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rows = {}
    for parallel in ("ddp", "fsdp"):
        for name, sizes, on_meta in (("small GPT (0.8M)", SMALL_GPT, False), ("GPT-2 124M (meta)", GPT2_124M, True)):
            mine = measure_bytes(parallel, sizes, on_meta)
            gathered: list = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, mine)
            rows[f"{name}|{parallel}"] = {k: max(g[k] for g in gathered) for k in mine}
    if dist.get_rank() == 0:
        print(json.dumps(rows), flush=True)
    dist.barrier()
    os._exit(0)  # gloo's teardown after DDP and FSDP modules can abort the process; the results are out


def torchrun(ranks: int, args: list[str], cwd: Path) -> str:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", *args]
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(cmd[3:6])} ... exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return done.stdout


def ms_per_step(ranks: int, parallel: str, steps: int, cwd: Path) -> float:
    from harness.core.metric_names import PERF_STEP_MS

    run_dir = cwd / f"run_{parallel}"
    torchrun(ranks, [str(ROOT / "train.py"), *TRAIN_GPT, f"trainer.max_steps={steps}", f"parallel={parallel}",
                     f"hydra.run.dir={run_dir}", "overwrite=true"], cwd)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    times = [r[PERF_STEP_MS] for r in rows if PERF_STEP_MS in r][1:]  # the first window warms up
    return statistics.median(times)


def mib(n: int) -> str:
    return f"{n / 2**20:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved DDP/FSDP timing rounds")
    parser.add_argument("--steps", type=int, default=60, help="training steps per timing run")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        out = torchrun(args.ranks, [str(Path(__file__).resolve()), "--worker"], Path(tmp))
        rows = json.loads(out.strip().splitlines()[-1])
        times: dict[str, list[float]] = {"ddp": [], "fsdp": []}
        for _ in range(args.rounds):
            for parallel in times:
                times[parallel].append(ms_per_step(args.ranks, parallel, args.steps, Path(tmp)))
    print(f"training-state bytes per rank (MiB; the largest rank), {args.ranks} ranks\n")
    print("| model | parallel | params | grads | AdamW moments | total | FSDP / DDP |")
    print("|---|---|---|---|---|---|---|")
    for model in ("small GPT (0.8M)", "GPT-2 124M (meta)"):
        ddp_total = sum(rows[f"{model}|ddp"].values())
        for parallel in ("ddp", "fsdp"):
            r = rows[f"{model}|{parallel}"]
            total = sum(r.values())
            print(f"| {model} | {parallel} | {mib(r['params'])} | {mib(r['grads'])} | {mib(r['optimizer'])} | "
                  f"{mib(total)} | {total / ddp_total:.3f} |")
    ddp, fsdp = statistics.median(times["ddp"]), statistics.median(times["fsdp"])
    print(f"\nms/step, small GPT, {args.ranks} ranks on CPU (gloo), medians of {args.rounds} interleaved rounds: "
          f"ddp {ddp:.1f}, fsdp {fsdp:.1f}, fsdp/ddp {fsdp / ddp:.2f}x")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
