"""Fault battery: every trial must end bitwise equal to an uninterrupted run, or refused in one
line, with nothing left running.

    python -m bench.faults [--trials 3] [--seed 0] [--out outputs/bench_faults]

Faults, each against its own uninterrupted reference run:
  kill -9     at a random moment of a single-process, a DDP, an FSDP and a remedy=auto run
              (the whole process tree), then resume=auto
  damaged     the newest checkpoint truncated, zeroed or a byte flipped; a shard of the newest
              .dcp truncated or zeroed; then resume=auto
  full disk   the run dir on a 3 MB tmpfs (root only): one line, exit 1, then resume=auto elsewhere
  launcher    kill -9 of torchrun alone: its ranks must be gone within 10 s; then resume=auto
  two runs    two resume=auto runs started together into one directory: one trains, one is refused
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path



from harness.state.checkpoint import load_checkpoint, step_checkpoints
from harness.core.metric_names import TRAIN_LOSS, VAL_LOSS
from harness.logger.jsonl import read_metrics

ROOT = Path(__file__).resolve().parent.parent

BASE = ["model=mlp", "data=synthetic", "model.width=64", "model.dropout=0.1", "logger=none", "diagnose=false",
        "trainer.max_steps=300", "trainer.log_every=1", "trainer.eval_every=50", "trainer.ckpt_every=25",
        "trainer.keep_last=3", "batch_size=32"]
RUNS = {
    "single": (1, BASE),
    "ddp": (2, [*BASE, "parallel=ddp"]),
    "fsdp": (2, [*BASE, "parallel=fsdp"]),
    "remedy": (1, ["experiment=pathology/lr_too_high", "trainer.max_steps=400", "trainer.ckpt_every=50",
                   "trainer.log_every=10", "trainer.eval_every=100", "logger=none", "diagnose.remedy=auto",
                   "diagnose.report=false"]),
}
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def command(kind: str, run_dir: Path, *extra: str) -> list[str]:
    nproc, args = RUNS[kind]
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"] \
        if nproc > 1 else [sys.executable]
    return [*launch, str(ROOT / "train.py"), *args, f"hydra.run.dir={run_dir}", *extra]


def run(kind: str, run_dir: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(command(kind, run_dir, *extra), capture_output=True, text=True, env=ENV, timeout=timeout)


def fingerprint(run_dir: Path) -> str:
    """What must be equal: every logged loss of every attempt, and the final weights of .pt runs."""
    dirs = sorted((run_dir / "attempts").iterdir()) if (run_dir / "attempts").is_dir() else [run_dir]
    rows = [[(r["step"], r["kind"], r.get(TRAIN_LOSS), r.get(VAL_LOSS)) for r in read_metrics(d)] for d in dirs]
    weights = []
    for d in dirs:
        newest = step_checkpoints(d)[0] if step_checkpoints(d) else None
        if newest is not None and newest.suffix == ".pt":
            model = load_checkpoint(newest)["model"]
            weights.append([(k, hashlib.sha256(v.contiguous().numpy().tobytes()).hexdigest()) for k, v in model.items()])
    return json.dumps([rows, weights])  # as text: a diverged attempt's NaN losses compare equal


def nothing_left(marker: str) -> bool:
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z" and marker in (proc / "cmdline").read_bytes().decode(errors="replace"):
                    return False
            except (OSError, IndexError):
                continue
    return True


def one_line_refusal(result: subprocess.CompletedProcess) -> bool:
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    return result.returncode != 0 and len(errors) == 1 and f"Traceback (most recent call last):\n  File \"{ROOT}" \
        not in result.stderr


def start(kind: str, run_dir: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(command(kind, run_dir, *extra), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env=ENV, start_new_session=True)


def kill_tree(proc: subprocess.Popen) -> None:
    """kill -9 of the whole process group (torchrun and its ranks sit in sessions of their own: the
    launcher's death takes them down)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def resumed_equal(kind: str, run_dir: Path, reference: object) -> tuple[bool, str]:
    result = run(kind, run_dir, "resume=auto")
    if result.returncode != 0:
        return False, f"resume failed: {result.stderr.strip().splitlines()[-1:]}"
    equal = fingerprint(run_dir) == reference
    return equal, "equal" if equal else "differs"


def kill_trial(kind: str, trial_dir: Path, reference: object, wall: float, rng: random.Random) -> tuple[bool, str]:
    run_dir = trial_dir / "run"
    proc = start(kind, run_dir)
    time.sleep(rng.uniform(0.3, 0.9) * wall)
    kill_tree(proc)
    return resumed_equal(kind, run_dir, reference)


def damage_trial(kind: str, trial_dir: Path, reference: object, how: str) -> tuple[bool, str]:
    run_dir = trial_dir / "run"
    stopped = run(kind, run_dir, "trainer.stop_after=150")
    if stopped.returncode != 0:
        return False, "the run to damage failed"
    newest = step_checkpoints(run_dir)[0]
    target = newest / "__1_0.distcp" if newest.is_dir() else newest
    data = bytearray(target.read_bytes())
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "zeroed":
        data = bytearray(len(data))
    else:
        data[len(data) // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    return resumed_equal(kind, run_dir, reference)


def full_disk_trial(kind: str, trial_dir: Path, reference: object) -> tuple[bool, str]:
    mount = trial_dir / "disk"
    mount.mkdir(parents=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True).returncode:
        return True, "skipped: no tmpfs mount (root only)"
    try:
        result = run(kind, mount / "run", "model.width=256")
        if not (result.returncode == 1 and one_line_refusal(result)):
            return False, f"not one line: exit {result.returncode}"
        if any(p.name.endswith(".tmp") for p in (mount / "run").rglob("*")):
            return False, "temporary files left"
        return True, "refused in one line"
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def launcher_trial(kind: str, trial_dir: Path, reference: object, rng: random.Random) -> tuple[bool, str]:
    run_dir = trial_dir / "run"
    proc = subprocess.Popen(command(kind, run_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    time.sleep(rng.uniform(4.0, 8.0))
    proc.kill()  # the launcher alone
    proc.wait(timeout=60)
    deadline = time.monotonic() + 10
    while not nothing_left(str(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.1)
    if not nothing_left(str(run_dir)):
        return False, "ranks outlived their launcher"
    return resumed_equal(kind, run_dir, reference)


def two_runs_trial(kind: str, trial_dir: Path, reference: object) -> tuple[bool, str]:
    run_dir = trial_dir / "run"
    procs = [subprocess.Popen(command(kind, run_dir, "resume=auto"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=ENV) for _ in range(2)]
    results = [subprocess.CompletedProcess(p.args, p.wait(timeout=600), *p.communicate()) for p in procs]
    codes = sorted(r.returncode for r in results)  # torchrun exits 1 when a rank exits 2
    if codes[0] != 0 or codes[1] not in (1, 2) or not one_line_refusal(next(r for r in results if r.returncode)):
        return False, f"exit codes {codes}"
    return fingerprint(run_dir) == reference, "one trained, one refused"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3, help="kill -9 trials per kind of run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "outputs" / "bench_faults")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    shutil.rmtree(args.out, ignore_errors=True)
    references, walls = {}, {}
    for kind in RUNS:
        started = time.perf_counter()
        result = run(kind, args.out / "reference" / kind)
        assert result.returncode == 0, result.stderr[-2000:]
        walls[kind], references[kind] = time.perf_counter() - started, fingerprint(args.out / "reference" / kind)
        print(f"reference {kind}: {walls[kind]:.1f} s", flush=True)
    trials = [(f"kill -9 {kind}", kind, lambda d, k: kill_trial(k, d, references[k], walls[k], rng))
              for kind in RUNS for _ in range(args.trials)]
    trials += [(f"damaged {how} .pt", "single", lambda d, k, h=how: damage_trial(k, d, references[k], h))
               for how in ("truncated", "zeroed", "flipped")]
    trials += [(f"damaged {how} shard", "fsdp", lambda d, k, h=how: damage_trial(k, d, references[k], h))
               for how in ("truncated", "zeroed")]
    trials += [("full disk", kind, lambda d, k: full_disk_trial(k, d, references[k])) for kind in ("single", "fsdp")]
    trials += [("launcher killed", kind, lambda d, k: launcher_trial(k, d, references[k], rng))
               for kind in ("ddp", "fsdp")]
    trials += [("two runs", kind, lambda d, k: two_runs_trial(k, d, references[k])) for kind in ("single", "ddp")]
    passed, total = Counter(), Counter()
    for number, (name, kind, trial) in enumerate(trials):
        trial_dir = args.out / f"{number:02d}"
        ok, how = trial(trial_dir, kind)
        ok = ok and nothing_left(str(trial_dir))
        total[name] += 1
        passed[name] += ok
        print(f"{number:2d} {name:<26} {kind:<7} {'pass' if ok else 'FAIL'}  {how}", flush=True)
    print(json.dumps({name: f"{passed[name]}/{total[name]}" for name in total}, indent=1))
    print(f"all: {sum(passed.values())}/{sum(total.values())} trials ended equal or refused in one line")


if __name__ == "__main__":
    main()
