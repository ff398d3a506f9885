"""GPU check: the harness's step time, throughput, MFU, memory and host syncs beside a bare loop.

The bare loop is nanoGPT's, on the same model, batch and precision, in the same process.

For every model x precision x compile x parallel (ddp: the model as it is in one process; fsdp:
sharded with FSDP2 on a one-rank mesh, the step's sharded code paths) it prints one row of a markdown table (paste it into
docs/benchmarks.md), then the closed-form FLOPs against torch's FLOP counter and where the host reads of
non-logging steps come from. The data are random tokens made in-process: nothing is downloaded
or read from disk.

    python scripts/gpu_check.py                 # default GPT and GPT-2 124M, fp32/bf16/fp16, eager and compiled
    python scripts/gpu_check.py --models gpt2-124m --precisions bf16 --compile on
    python scripts/gpu_check.py --device cpu    # a tiny run through the same code (the test does this)

Without a CUDA device (and without --device cpu) it prints why it skips and exits 0.
"""
from __future__ import annotations

import argparse
import copy
import gc
import math
import statistics
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from omegaconf import DictConfig

from hydra import compose, initialize_config_dir

from harness.assembly.assemble import Assembly, assemble
from harness.config.run_config import validate_config
from harness.data.base import TokenWindows
from harness.core.distributed import DistInfo, init_process_group
from harness.core.errors import HarnessError
from harness.training.perf import flops_per_update, measure_flops, mfu, peak_flops
from harness.core.host_reads import count_host_reads
from harness.training.precision import DTYPES

CONF = Path(__file__).resolve().parent.parent / "conf"
FACTORY = f"{__name__}.random_splits"  # data=custom's data._target_: this module, however it was started


@dataclass(frozen=True)
class Workload:
    overrides: tuple[str, ...]  # model keys on top of model=gpt's defaults
    vocab: int
    block_size: int
    batch_size: int


WORKLOADS = {
    # model=gpt and train.yaml's batch as they are, with a byte-sized vocabulary
    "default": Workload((), vocab=256, block_size=64, batch_size=32),
    "gpt2-124m": Workload(("model.n_layer=12", "model.n_head=12", "model.n_embd=768"),
                          vocab=50304, block_size=1024, batch_size=8),
    "tiny": Workload(("model.n_layer=2", "model.n_head=2", "model.n_embd=32"), vocab=64, block_size=32, batch_size=8),
}
# What a flag left out means, per device: a GPU gets the full check, the CPU a seconds-long one.
DEFAULTS = {
    "cuda": {"models": ["default", "gpt2-124m"], "precisions": ["fp32", "bf16", "fp16"], "compile": "both",
             "parallel": ["ddp", "fsdp"], "steps": 50, "block": 10, "warmup": 10, "sync_steps": 10},
    "cpu": {"models": ["tiny"], "precisions": ["fp32", "bf16"], "compile": "off", "parallel": ["ddp", "fsdp"],
            "steps": 6, "block": 3, "warmup": 2, "sync_steps": 3},
}


class RandomTokens(TokenWindows):
    """Uniform random token ids: nothing to learn, but every step does the real step's work."""

    def __init__(self, vocab: int, block_size: int, n_tokens: int, seed: int) -> None:
        ids = np.random.default_rng(seed).integers(0, vocab, n_tokens, dtype=np.uint16)
        super().__init__(ids, block_size)
        self.vocab_size = vocab  # data=custom reads the vocabulary from here


def random_splits(vocab: int, block_size: int) -> tuple[RandomTokens, RandomTokens]:
    """data=custom's factory: (train, val) windows over random tokens."""
    n_tokens = 64 * block_size + 1
    return RandomTokens(vocab, block_size, n_tokens, 0), RandomTokens(vocab, block_size, n_tokens, 1)


def make_run(work: Workload, precision: str, compiled: bool, device: str, run_dir: Path,
             parallel: str = "ddp") -> Assembly:
    """The harness as train.py builds it (conf/ composed, validated, assembled), on random tokens."""
    overrides = [*work.overrides, f"model.block_size={work.block_size}", f"batch_size={work.batch_size}",
                 "data=custom", f"data._target_={FACTORY}", "data.task=lm", f"+data.vocab={work.vocab}",
                 f"+data.block_size={work.block_size}", f"precision={precision}", f"compile={str(compiled).lower()}",
                 f"device={device}", f"parallel={parallel}", "trainer.max_steps=1000000", "logger=none",
                 "diagnose=false"]
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="train", overrides=overrides)
    config = validate_config(cfg)
    return assemble(config, run_dir, config.device, resume_from=None, console=False)  # the console stays out of the timing


class BareLoop:
    """nanoGPT's loop on a copy of the harness's model: forward under autocast, backward (scaled
    for fp16), clip_grad_norm_, fused AdamW step, zero_grad. No host reads: the floor to compare with."""

    def __init__(self, model: torch.nn.Module, cfg: DictConfig, data: RandomTokens, device: torch.device) -> None:
        self.raw, self.data, self.device = model, data, device
        self.model = torch.compile(model) if cfg.compile else model
        self.batch_size, self.clip = cfg.batch_size, float(cfg.clip)
        params = list(model.parameters())
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.optim.weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=cfg.optim.lr, betas=tuple(cfg.optim.betas), eps=cfg.optim.eps,
                                           fused=True)
        precision = cfg.precision.name
        self.scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
        self.autocast = nullcontext() if precision == "fp32" else torch.autocast(device.type, DTYPES[precision])

    def batch(self) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = self.data.gather(torch.randint(len(self.data), (self.batch_size,)))
        if self.device.type == "cuda":
            return x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        return x, y

    def step(self, model: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        x, y = self.batch()
        with self.autocast:
            logits = (model or self.model)(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.raw.parameters(), self.clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)


@dataclass
class Result:
    model: str
    precision: str
    compiled: bool
    parallel: str
    step_s: float  # median seconds per harness step
    bare_step_s: float
    tokens_per_update: int
    mfu: float | None
    peak_memory: int | None  # bytes the harness held at most (CUDA only)
    host_syncs: float | None  # per non-logging step; None: every counted step was a logging step
    sync_sources: Counter[tuple[str, str]]  # (what, where) -> reads, over the counted non-logging steps


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def median_step_seconds(steps: dict[str, Callable[[], object]], n_steps: int, block: int,
                        device: torch.device) -> dict[str, float]:
    """Per-step time of each variant: the median over blocks of `block` steps, variants interleaved
    so machine noise hits all alike, the device drained around each block (its queue runs ahead of
    the host). The harness's blocks include its logging steps, as a run's do."""
    per_step: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(math.ceil(n_steps / block)):
        for name, step in steps.items():
            synchronize(device)
            t0 = time.perf_counter()
            for _ in range(block):
                step()
            synchronize(device)
            per_step[name].append((time.perf_counter() - t0) / block)
    return {name: statistics.median(times) for name, times in per_step.items()}


def host_syncs(trainer, n_steps: int, device: torch.device) -> tuple[float | None, Counter[tuple[str, str]]]:
    """Host syncs per non-logging step: Python-level reads of tensor values (count_host_reads)
    and, on CUDA, the synchronizing calls torch's sync debug mode warns about; the larger."""
    reads, sources = [], Counter()
    for _ in range(n_steps):
        with count_host_reads() as seen:
            logged = trainer.advance()
        if not logged:
            reads.append(seen.count)
            sources.update(seen.reads)
    syncs = []
    if device.type == "cuda":
        for _ in range(n_steps):
            synchronize(device)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                torch.cuda.set_sync_debug_mode("warn")
                try:
                    logged = trainer.advance()
                finally:
                    torch.cuda.set_sync_debug_mode("default")
            if not logged:
                syncs.append(sum("synchroniz" in str(w.message) for w in caught))
    counts = [statistics.mean(c) for c in (reads, syncs) if c]
    return (max(counts) if counts else None), sources


def check(name: str, precision: str, compiled: bool, parallel: str, device: torch.device, args: argparse.Namespace,
          flop_lines: list[str]) -> Result:
    """One row: build the harness and a bare loop on a copy of its model, warm both up, time them."""
    work = WORKLOADS[name]
    with tempfile.TemporaryDirectory() as run_dir:
        built = make_run(work, precision, compiled, str(device), Path(run_dir), parallel)
        trainer = built.trainer
        if parallel == "fsdp":  # a sharded module does not copy: the bare loop gets the same model unsharded
            with tempfile.TemporaryDirectory() as other:
                bare_model = make_run(work, precision, compiled, "cpu", Path(other)).raw_model
        else:
            bare_model = copy.deepcopy(built.raw_model).cpu()  # off the device while the harness's peak is taken
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        for _ in range(args.warmup):
            trainer.advance()
        peak_memory = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        bare = BareLoop(bare_model.to(device), built.config.record, built.train_set, device)
        for _ in range(args.warmup):
            bare.step()
        times = median_step_seconds({"harness": lambda: trainer.advance(), "bare": bare.step},
                                    args.steps, args.block, device)
        syncs, sources = host_syncs(trainer, args.sync_steps, device)
        flops = flops_per_update(built.raw_model, work.batch_size)
        if not flop_lines or not flop_lines[-1].startswith(f"{name}:"):  # once per model
            counted = measure_flops(lambda: bare.step(bare.raw))  # eager, whatever the row's compile setting
            why = ("on CUDA the fused attention kernels count 14·n_layer·n_embd·T a token against the closed "
                   "form's 12: their backward recomputes the scores" if device.type == "cuda"
                   else "on CPU the fused attention kernel is not counted")
            flop_lines.append(f"{name}: {flops / 1e9:.4g} GFLOP/update in closed form; FlopCounterMode counted "
                              f"{counted / 1e9:.4g} (x{counted / flops:.3f}: {why})")
        trainer.close()
    peak = peak_flops(device, precision, args.peak_tflops)
    return Result(name, precision, compiled, parallel, times["harness"], times["bare"], work.batch_size * work.block_size,
                  None if peak is None else mfu(flops, times["harness"], peak), peak_memory, syncs, sources)


def release(device: torch.device) -> None:
    """Free the last row's trainer, compiled graphs and cached blocks before the next row."""
    gc.collect()
    torch._dynamo.reset()  # also keeps GPT.forward under dynamo's recompile limit across rows
    if device.type == "cuda":
        torch.cuda.empty_cache()


def markdown_table(results: list[Result]) -> str:
    lines = ["| model | precision | compile | parallel | ms/step | tokens/s | MFU | peak memory | host syncs/step "
             "| bare ms/step | harness/bare |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        cells = [r.model, r.precision, "on" if r.compiled else "off", r.parallel, f"{1000 * r.step_s:.2f}",
                 f"{r.tokens_per_update / r.step_s:,.0f}", "n/a" if r.mfu is None else f"{100 * r.mfu:.1f}%",
                 "n/a" if r.peak_memory is None else f"{r.peak_memory / 2**30:.2f} GiB",
                 "n/a" if r.host_syncs is None else f"{r.host_syncs:g}", f"{1000 * r.bare_step_s:.2f}",
                 f"{r.step_s / r.bare_step_s:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                        help="cpu: a tiny run through the same code paths")
    parser.add_argument("--models", nargs="+", choices=list(WORKLOADS))
    parser.add_argument("--precisions", nargs="+", choices=list(DTYPES))
    parser.add_argument("--compile", choices=["off", "on", "both"])
    parser.add_argument("--parallel", nargs="+", choices=["ddp", "fsdp"],
                        help="ddp: the model as it is (one process); fsdp: sharded on a one-rank mesh")
    parser.add_argument("--steps", type=int, help="timed steps per variant and row")
    parser.add_argument("--block", type=int, help="steps per timed block (variants alternate between blocks)")
    parser.add_argument("--warmup", type=int, help="untimed steps first (compilation happens here)")
    parser.add_argument("--sync-steps", type=int, help="steps counted for host syncs")
    parser.add_argument("--peak-tflops", type=float, help="the device's peak TFLOPS (default: looked up by GPU name)")
    args = parser.parse_args()
    for key, value in DEFAULTS[args.device].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    return args


def main() -> None:
    args = parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"gpu_check: skipped: no CUDA device here (torch {torch.__version__}); the CPU paths are covered "
              f"by the tests, and --device cpu runs this script tiny on the CPU")
        return
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)  # steady timings when other work shares the cores (as in bench_overhead.py)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    peaks = {p: peak_flops(device, p, args.peak_tflops) for p in args.precisions}
    shown = ", ".join(f"{p} {'none (MFU n/a; --peak-tflops sets one)' if v is None else f'{v / 1e12:g}'}"
                      for p, v in peaks.items())
    print(f"{name}; torch {torch.__version__}; TF32 {'on' if torch.backends.cuda.matmul.allow_tf32 else 'off'}; "
          f"peak TFLOPS {shown}")
    if "fsdp" in args.parallel:
        init_process_group(DistInfo(), device, single=True)  # fully_shard needs a process group, of one rank here
    results, flop_lines = [], []
    for model in args.models:
        for precision in args.precisions:
            for compiled in {"off": [False], "on": [True], "both": [False, True]}[args.compile]:
                for parallel in args.parallel:
                    print(f"  {model} {precision} compile={'on' if compiled else 'off'} parallel={parallel} ...",
                          flush=True)
                    try:
                        results.append(check(model, precision, compiled, parallel, device, args, flop_lines))
                    except HarnessError as err:  # e.g. bf16 on a GPU without it: refused, the row is left out
                        print(f"    left out: {err}")
                    release(device)
    print()
    print(markdown_table(results))
    print()
    for line in flop_lines:
        print(line)
    for r in results:
        for (what, where), n in r.sync_sources.most_common():
            print(f"host read on non-logging steps ({r.model} {r.precision} compile={'on' if r.compiled else 'off'} "
                  f"{r.parallel}): "
                  f"{what} at {where} x{n}")


if __name__ == "__main__":
    main()
