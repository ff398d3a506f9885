"""How often does the diagnosis raise an alarm on a run that is healthy?

    python -m bench.false_alarms                  # 200 runs, a fresh draw (~10 min on 2 cores)
    python -m bench.false_alarms --seed 4711      # that draw again, run for run
    python -m bench.false_alarms --runs 20 --workers 2 --out /tmp/fa

Each invocation draws `--runs` configurations at random, each one independently, from a declared
*working space* (WORKING_SPACE below): model families, optimizers with LRs inside the range where
each is known to train these small models, batch sizes from 1 to 256, precisions, raw or
standardised inputs, schedules, clipping and a fresh seed per run; a space in which runs are
expected to train fine. The draw's seed is printed first; `--seed S` repeats it, and the first N
runs of a draw are the same whatever `--runs` is. Nothing here is tuned on a draw that is scored:
a new invocation draws new runs.

Each run trains in-process in one of `--workers` spawned worker processes (one thread each), with
the end-of-run report off (no report.md, no plots) and the live check on but never stopping a run
(`diagnose.abort_on=null`, no remedies), in a run dir of its own under --out (default
outputs/bench_false_alarms/SEED/). Afterwards the run is scored by its own outcome
(harness/diagnosis/outcome.py: did its best eval clearly beat its untrained start, and its prior,
and did it end near its best?) and diagnosed (`diagnose(load_run(run_dir))`, the findings the
report would list). Among the runs that learned and ended near their best, a warning or critical
finding is a false alarm: the table counts the runs with a critical finding and those with a
warning, and names the findings that fired most; the live check's alarms (`diagnosis` events) are
counted beside them. Runs that did not learn are listed with their findings: in a working space
they are rare, and whether their findings are right is another benchmark's question
(bench/pathology_suite.py).

Printed: the seed, the space, one markdown row per run, the totals; OUT/results.json holds the
rows. The exit code is 0 (a measurement), or 1 when a run crashed (its row holds the error).
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing
import os
import random
import secrets
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
ALARMS = ("critical", "warning")  # the severities that count as an alarm; info never does


# --- the working space -----------------------------------------------------------------------------
#
# Everything a run may be drawn from, in one place. Each run draws each axis independently: a family
# (with its own architecture choices), an optimizer among those the family trains with and its LR
# log-uniformly inside that optimizer's range, a batch size, a precision, a schedule, a clip, raw or
# standardised inputs where the family reads real-valued inputs through the built-in loss, a length
# and a seed.

BATCH = (1, 256)  # log-uniform integer (each octave as likely)
LOW_BATCH = 8  # below it, the LR is drawn from the lower half (in log) of its range (small batches give
#                noisy gradients: the linear scaling rule read backwards), and the run takes twice the
#                steps (it sees few samples per step, and its steps are cheap)
STEPS = (200, 400)  # uniform integer; x2 below LOW_BATCH
EVALS = 6  # evals after the untrained one (trainer.eval_every = steps // EVALS)
EVAL_SAMPLES = 256  # validation samples per eval: trainer.eval_batches = ceil(256 / batch) ...
EVAL_BATCHES = (4, 32)  # ... within these bounds (a batch-1 run still scores 32 samples, not 20)

# LR ranges (log-uniform), by optimizer; a family may narrow or move one (Family.lr).
# - adam/adamw 3e-4..3e-3: Adam's default 1e-3 within half a decade; what small MLPs, CNNs, char
#   transformers and LSTMs train with (nanoGPT's shakespeare_char: 1e-3; char-RNNs: 2e-3).
# - sgd (Nesterov momentum 0.9, the conf's) 1e-2..1e-1: the classic range of MLPs and BN ResNets.
# - lion 1e-4..1e-3: the Lion paper's advice, 3-10x below AdamW's.
# - muon 1e-2..5e-2: around Muon's default 0.02 (its AdamW part runs at lr/20).
# - lamb 1e-3..1e-2: a per-layer trust ratio makes lr the relative step of each layer's weights.
OPTIM_LR = {
    "adam": (3e-4, 3e-3),
    "adamw": (3e-4, 3e-3),
    "sgd": (1e-2, 1e-1),
    "lion": (1e-4, 1e-3),
    "muon": (1e-2, 5e-2),
    "lamb": (1e-3, 1e-2),
}
# Not drawn: adamw8bit (bitsandbytes, CUDA only); adafactor (its lr is a cap on a relative step
# whose working range for models this small is not established).
OPTIMIZERS = tuple(OPTIM_LR)

# fp32 and bf16 (CPU autocast; ~1.2x fp32's time here; the RNN's recurrence stays fp32). fp16 (with
# its GradScaler) also trains on CPU, but 4-8x slower than fp32 (no fast fp16 CPU kernels: a GPT
# run of 7 s took 57 s), and no one trains in fp16 on a CPU: it is left out.
PRECISIONS = ("fp32", "bf16")
# The conf's schedules, each with its own default warmup (10% of the steps; constant: none).
SCHEDULES = ("cosine", "linear", "wsd", "constant")

# Shared by every run: no tracker, no end-of-run report (diagnosed here), the live check on but never
# stopping a run, no remedies; metrics and per-layer statistics every 5 steps so that short runs have
# curves (as bench/pathology_suite.py); one checkpoint, at the end (best.pt still follows every eval).
COMMON = ("logger=none", "diagnose.report=false", "diagnose.live=true", "diagnose.abort_on=null",
          "diagnose.remedy=off", "trainer.log_every=5", "monitor.every=5", "device=cpu", "overwrite=true")


@dataclass(frozen=True)
class Family:
    """One model family: its fixed overrides, the architecture choices drawn per run, the
    optimizers it trains with (with the LR ranges that differ from OPTIM_LR), and what else applies."""

    name: str
    overrides: tuple[str, ...]
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # key -> values, one drawn
    optimizers: tuple[str, ...] = OPTIMIZERS
    lr: dict[str, tuple[float, float]] = field(default_factory=dict)  # optimizer -> its range here
    standardize: bool = True  # real-valued inputs through the built-in loss: data.standardize drawn
    clips: tuple[str, ...] = ("1.0", "null")  # the harness's default global-norm clip, or none
    weight: float = 1.0  # relative chance of being drawn


_CHAR = ("data=stdlib", "model.block_size=32")
# The `data` choices: a built-in option, or RAW_DIGITS (data=custom with raw_digits below).
RAW_DIGITS = "raw-digits"
DATA = {"synthetic": ("data=synthetic",), "digits": ("data=digits",),
        RAW_DIGITS: ("data=custom", "data._target_=bench.false_alarms.raw_digits")}
USER_CE = ("model=mlp", "loss._target_=bench.false_alarms.cross_entropy")
USER_VAE = ("data=digits", "model._target_=bench.false_alarms.VAE", "loss._target_=bench.false_alarms.elbo")

WORKING_SPACE: tuple[Family, ...] = (
    # MLPs on the synthetic vector task (N(0, 1) features, a linear teacher's argmax or value).
    Family("mlp-synthetic", ("model=mlp", "data=synthetic"),
           {"data.task": ("classification", "regression"), "model.depth": ("2", "3"), "model.width": ("64", "128"),
            "model.activation": ("relu", "gelu", "tanh")}),
    # MLPs on the 8x8 digits (flattened): data=digits (pixels scaled by one global mean and std) or
    # RAW_DIGITS (the 0..16 pixel values scikit-learn ships, as a user's own dataset would hold them).
    Family("mlp-digits", ("model=mlp",),
           {"data": ("digits", RAW_DIGITS), "model.depth": ("2", "3"), "model.width": ("64", "128"),
            "model.activation": ("relu", "gelu")}),
    # Pre-activation ResNets on the digits, as data=digits gives them or raw. Batch norm needs a batch
    # to take statistics from: below BN_MIN_BATCH samples the norm is group norm (Wu & He 2018), as a
    # practitioner would pick.
    Family("resnet-digits", ("model=resnet",),
           {"data": ("digits", RAW_DIGITS), "model.width": ("8", "16"), "model.norm": ("batch", "group")}),
    # A small character GPT on the stdlib corpus. No SGD: attention models are known not to train
    # well with it (Zhang et al. 2020); the Adam family, Lion, Muon and LAMB (made for BERT).
    Family("gpt-chars", ("model=gpt", *_CHAR, "model.n_layer=2", "model.n_head=4"),
           {"model.n_embd": ("32", "64")}, optimizers=("adam", "adamw", "lion", "muon", "lamb"), standardize=False),
    # A character LSTM/GRU. Recurrent LMs take larger steps than feed-forward nets: Adam 1e-3..5e-3
    # (char-RNN's 2e-3), SGD with momentum 0.05..0.5; Muon's Newton-Schulz on gate-stacked recurrent
    # matrices is not an established recipe, so it is left out. Recurrent nets are trained with
    # their gradients clipped (Pascanu et al. 2013; char-rnn clips at 5): always the default clip.
    Family("rnn-chars", ("model=rnn", *_CHAR, "model.n_layer=1", "model.n_embd=32"),
           {"model.cell": ("lstm", "gru"), "model.hidden": ("64", "128")},
           optimizers=("adam", "adamw", "sgd", "lion", "lamb"),
           lr={"adam": (1e-3, 5e-3), "adamw": (1e-3, 5e-3), "sgd": (5e-2, 5e-1)}, standardize=False, clips=("1.0",)),
    # The user's own objective (loss._target_, defined in this file): a cross-entropy written by
    # hand on the MLP, on vectors or digits; and a VAE (recon + KL, beta 1) on the digits, trained as
    # VAEs are, with Adam or AdamW (or Lion): its reconstruction is summed over 64 pixels, so SGD's
    # step grows with the pixel count. The harness refuses data.standardize beside a user
    # objective, so it is not drawn.
    Family("user-ce", USER_CE, {"data": ("synthetic", "digits", RAW_DIGITS), "model.width": ("64", "128")},
           standardize=False, weight=0.5),
    Family("user-vae", USER_VAE, {"+model.latent": ("4", "8"), "+model.hidden": ("64", "128")},
           optimizers=("adam", "adamw", "lion"), standardize=False, weight=0.5),
)
BN_MIN_BATCH = 16


@dataclass(frozen=True)
class RunSpec:
    id: int
    family: str
    optimizer: str
    lr: float
    batch: int
    precision: str
    schedule: str
    clip: str
    standardize: bool | None  # None: not drawn for this family
    steps: int
    seed: int
    choices: dict[str, str]
    overrides: tuple[str, ...]

    def summary(self) -> str:
        arch = " ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in self.choices.items())
        std = "" if self.standardize is None else (" std" if self.standardize else " no-std")
        clip = "clip 1" if self.clip != "null" else "no clip"
        return (f"{self.family} ({arch}) · {self.optimizer} lr {self.lr:.1e} · b{self.batch} · {self.precision}"
                f"{std} · {self.schedule} · {clip} · {self.steps} steps")


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def draw_batch(rng: random.Random) -> int:
    """Log-uniform integer in BATCH (each octave as likely)."""
    lo, hi = BATCH
    return min(hi, int(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))


def lr_range(family: Family, optimizer: str, batch: int) -> tuple[float, float]:
    """The optimizer's LR range on this family; its lower half (in log) below LOW_BATCH."""
    lo, hi = family.lr.get(optimizer, OPTIM_LR[optimizer])
    return (lo, math.sqrt(lo * hi)) if batch < LOW_BATCH else (lo, hi)


def draw_run(draw_seed: int, i: int) -> RunSpec:
    """Run `i` of the draw `draw_seed`: independent of every other run and of how many are drawn."""
    rng = random.Random(f"false_alarms/{draw_seed}/{i}")
    family = rng.choices(WORKING_SPACE, weights=[f.weight for f in WORKING_SPACE])[0]
    choices = {key: rng.choice(values) for key, values in family.choices.items()}
    optimizer = rng.choice(family.optimizers)
    batch = draw_batch(rng)
    lr = _log_uniform(rng, *lr_range(family, optimizer, batch))
    precision = rng.choice(PRECISIONS)
    schedule = rng.choice(SCHEDULES)
    clip = rng.choice(family.clips)
    standardize = rng.random() < 0.5 if family.standardize else None
    steps = rng.randint(*STEPS) * (2 if batch < LOW_BATCH else 1)
    seed = rng.randrange(1, 10**6)
    if choices.get("model.norm") == "batch" and batch < BN_MIN_BATCH:
        choices["model.norm"] = "group"
    eval_batches = min(max(math.ceil(EVAL_SAMPLES / batch), EVAL_BATCHES[0]), EVAL_BATCHES[1])
    chosen = [o for k, v in choices.items() for o in (DATA[v] if k == "data" else (f"{k}={v}",))]
    overrides = (*COMMON, *family.overrides, *chosen, f"optim={optimizer}",
                 f"optim.lr={lr:.3g}", f"batch_size={batch}", f"precision={precision}", f"schedule={schedule}",
                 f"clip={clip}", *((f"data.standardize={str(standardize).lower()}",) if standardize is not None else ()),
                 f"trainer.max_steps={steps}", f"trainer.eval_every={steps // EVALS}",
                 f"trainer.eval_batches={eval_batches}", f"trainer.ckpt_every={steps}", f"seed={seed}")
    return RunSpec(i, family.name, optimizer, float(f"{lr:.3g}"), batch, precision, schedule, clip, standardize, steps,
                   seed, choices, overrides)


def describe_space() -> str:
    lines = ["families (architecture choices drawn per run; optimizers with their LR range):"]
    for f in WORKING_SPACE:
        opts = ", ".join(f"{o} {lo:.0e}..{hi:.0e}" for o in f.optimizers
                         for lo, hi in [f.lr.get(o, OPTIM_LR[o])])
        choices = "; ".join(f"{k} in {{{', '.join(v)}}}" for k, v in f.choices.items())
        lines.append(f"- {f.name} (weight {f.weight:g}): {' '.join(f.overrides)}; {choices}; {opts}"
                     + ("; data.standardize in {false, true}" if f.standardize else ""))
    lines.append(f"- batch_size log-uniform in [{BATCH[0]}, {BATCH[1]}]; below {LOW_BATCH} the LR comes from the lower "
                 f"half (log) of its range; resnet batch norm below batch {BN_MIN_BATCH} becomes group norm")
    lines.append(f"- precision in {{{', '.join(PRECISIONS)}}}; schedule in {{{', '.join(SCHEDULES)}}} (conf warmups); "
                 "clip in {1.0, null} (rnn-chars: 1.0)")
    lines.append(f"- steps uniform in [{STEPS[0]}, {STEPS[1]}] (x2 below batch {LOW_BATCH}), eval every "
                 f"steps//{EVALS}, eval on ~{EVAL_SAMPLES} samples (eval_batches in [{EVAL_BATCHES[0]}, "
                 f"{EVAL_BATCHES[1]}]); a fresh seed per run")
    lines.append(f"- every run: {' '.join(COMMON)}")
    return "\n".join(lines)


# --- the user's own objective, as a user would write it (docs/bring-your-own.md) -------------------

def cross_entropy(output, batch):
    """A hand-written classification loss: log-softmax and the picked class's negative log-likelihood."""
    _, target = batch
    return -output.log_softmax(-1).gather(1, target.long().unsqueeze(1)).mean()


class VAE(nn.Module):
    """A Gaussian VAE on flattened inputs: an MLP encoder to (mu, logvar), a reparameterised sample,
    an MLP decoder back to the inputs."""

    def __init__(self, in_features: int, latent: int = 8, hidden: int = 64):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU())
        self.mu, self.logvar = nn.Linear(hidden, latent), nn.Linear(hidden, latent)
        self.dec = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, in_features))

    def forward(self, x):
        h = self.enc(x.flatten(1))
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return {"recon": self.dec(z), "mu": mu, "logvar": logvar}


def elbo(output, batch, beta: float = 1.0):
    """The negative ELBO: squared-error reconstruction (a unit-variance Gaussian) + beta x KL, per sample."""
    x = batch[0].flatten(1)
    recon = F.mse_loss(output["recon"], x, reduction="none").sum(1).mean()
    kl = (-0.5 * (1 + output["logvar"] - output["mu"].pow(2) - output["logvar"].exp()).sum(1)).mean()
    return {"loss": recon + beta * kl, "recon": recon, "kl": kl}


def raw_digits(val_fraction: float = 0.2, seed: int = 0):
    """data=custom's factory: scikit-learn's 8x8 digits as it ships them, [1, 8, 8] pixels of 0..16
    (unscaled: `data.standardize` is what scales them), split as data=digits splits them."""
    from sklearn.datasets import load_digits
    from torch.utils.data import TensorDataset

    bunch = load_digits()
    images = torch.as_tensor(bunch.images, dtype=torch.float32).unsqueeze(1)
    labels = torch.as_tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed))
    n_val = int(len(labels) * val_fraction)
    val, train = order[:n_val], order[n_val:]
    return TensorDataset(images[train], labels[train]), TensorDataset(images[val], labels[val])


# --- running and scoring ---------------------------------------------------------------------------

def _init_worker() -> None:
    torch.set_num_threads(1)
    # the runs' own console (a live alarm's line, warnings) would interleave across workers: their
    # events are in each run dir, and the rows say what matters
    logging.getLogger("harness").setLevel(logging.ERROR)
    from harness.entry.resolvers import register_resolvers

    register_resolvers()


def compose_cfg(overrides: tuple[str, ...]):
    """conf/ composed as `python train.py OVERRIDES` composes it."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def train_one(spec: RunSpec, out: Path) -> dict[str, Any]:
    """Train the run in this process, then score it; an exception is a row with its error."""
    from harness.modes.run import run

    _init_worker()
    run_dir = out / f"run{spec.id:03d}"
    started = time.monotonic()
    error = None
    try:
        run(compose_cfg(spec.overrides), run_dir=run_dir)
    except (Exception, SystemExit) as exc:  # noqa: BLE001  a run that cannot train is a row, not the end
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        traceback.print_exc()
    scored: dict[str, Any] = {}
    if error is None:
        try:
            scored = score(run_dir)
        except Exception as exc:  # noqa: BLE001  the diagnosis itself failing is a crash of this run
            error = f"diagnosis failed: {type(exc).__name__}: {exc}".splitlines()[0][:300]
            traceback.print_exc()
    return {**crashed_row(spec, out, error), "seconds": round(time.monotonic() - started, 1), **scored}


def crashed_row(spec: RunSpec, out: Path, error: str | None) -> dict[str, Any]:
    """A row without scores: what a run that crashed leaves (`error`), and the start of every row."""
    return {"id": spec.id, "config": spec.summary(), "spec": asdict(spec), "run_dir": str(out / f"run{spec.id:03d}"),
            "seconds": 0.0, "error": error}


def score(run_dir: Path) -> dict[str, Any]:
    """The run's outcome and findings: what the report would say."""
    from harness.diagnosis import diagnose, load_run
    from harness.diagnosis.outcome import LEARNED, NEAR, outcome

    run = load_run(run_dir)
    findings = diagnose(run)
    ended = outcome(run)
    return {"status": run.summary.get("status"),
            "outcome": ended.line() if ended is not None else "no baseline eval",
            "learned": ended is not None and ended.state == LEARNED and ended.ending == NEAR,
            "state": ended.state if ended else None, "ending": ended.ending if ended else None,
            "findings": [{"name": f.name, "severity": f.severity.value, "title": f.title} for f in findings],
            "live": sorted({str(e.get("finding")) for e in run.events_of("diagnosis")})}


def alarms(row: dict, severity: str | None = None) -> list[str]:
    """The row's warning/critical finding names (or those of one severity)."""
    return [f["name"] for f in row.get("findings", ())
            if f["severity"] in ALARMS and (severity is None or f["severity"] == severity)]


def run_all(specs: list[RunSpec], out: Path, workers: int) -> list[dict]:
    """Every run, `workers` spawned processes at a time. A worker that dies takes the runs it held
    down with its pool: those are run again one per fresh process, and one that dies again is a
    crashed row."""
    context = multiprocessing.get_context("spawn")
    rows: list[dict] = []

    def done(row: dict) -> None:
        rows.append(row)
        verdict = ("CRASH " + row["error"]) if row["error"] else (
            f"{'learned' if row['learned'] else 'not learned'}: {', '.join(alarms(row)) or 'no alarm'}")
        print(f"[{len(rows)}/{len(specs)}] run{row['id']:03d} {row['seconds']:5.1f} s  {row['config']}  -> {verdict}",
              flush=True)

    broken: list[RunSpec] = []
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker) as pool:
        futures = {pool.submit(train_one, spec, out): spec for spec in specs}
        for future in as_completed(futures):
            try:
                done(future.result())
            except BrokenProcessPool:
                broken.append(futures[future])
            except Exception as exc:  # noqa: BLE001  e.g. a result that would not pickle
                done(crashed_row(futures[future], out, f"{type(exc).__name__}: {exc}".splitlines()[0][:300]))
    for spec in sorted(broken, key=lambda s: s.id):  # alone, so a second death names its run
        with ProcessPoolExecutor(1, mp_context=context, initializer=_init_worker) as pool:
            try:
                done(pool.submit(train_one, spec, out).result())
            except Exception as exc:  # noqa: BLE001  BrokenProcessPool: it died again
                done(crashed_row(spec, out, f"worker process died: {type(exc).__name__}: {exc}"[:300]))
    return sorted(rows, key=lambda r: r["id"])


# --- the report ------------------------------------------------------------------------------------

def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a rate k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate(k: int, n: int) -> str:
    if not n:
        return f"{k}/0"
    lo, hi = wilson(k, n)
    return f"{k}/{n} ({100 * k / n:.1f}%, 95% CI {100 * lo:.1f}-{100 * hi:.1f}%)"


def totals(rows: list[dict]) -> dict[str, Any]:
    crashed = [r for r in rows if r["error"]]
    learned = [r for r in rows if not r["error"] and r["learned"]]
    not_learned = [r for r in rows if not r["error"] and not r["learned"]]
    return {
        "runs": len(rows), "crashed": len(crashed), "learned_near_best": len(learned),
        "learned_with_critical": sum(bool(alarms(r, "critical")) for r in learned),
        "learned_with_warning": sum(bool(alarms(r, "warning")) for r in learned),
        "learned_with_any_alarm": sum(bool(alarms(r)) for r in learned),
        "learned_with_live_alarm": sum(bool(r["live"]) for r in learned),
        "alarm_names_on_learned": dict(Counter(n for r in learned for n in set(alarms(r))).most_common()),
        "not_learned": len(not_learned),
        "seconds_per_run": round(sum(r["seconds"] for r in rows) / max(len(rows), 1), 1),
    }


def report(rows: list[dict], seed: int, seconds: float) -> str:
    t = totals(rows)
    lines = ["| id | config | seed | outcome | alarms |", "|---|---|---|---|---|"]
    for r in rows:
        if r["error"]:
            lines.append(f"| {r['id']} | {r['config']} | {r['spec']['seed']} | CRASHED: {r['error']} | |")
            continue
        found = ", ".join(f"{f['name']} ({f['severity']})" for f in r["findings"] if f["severity"] in ALARMS)
        live = f"; live: {', '.join(r['live'])}" if r["live"] else ""
        lines.append(f"| {r['id']} | {r['config']} | {r['spec']['seed']} | {r['outcome']} | {found or '-'}{live} |")
    n = t["learned_near_best"]
    lines += ["", (f"draw {seed}: {t['runs']} runs in {seconds / 60:.1f} min ({t['seconds_per_run']} s per run), "
                   f"{t['crashed']} crashed"),
              f"learned and ended near their best: {t['learned_near_best']}",
              f"- with a critical finding: {_rate(t['learned_with_critical'], n)}",
              f"- with a warning: {_rate(t['learned_with_warning'], n)}",
              f"- with either (a false alarm): {_rate(t['learned_with_any_alarm'], n)}",
              f"- with a live alarm while training: {_rate(t['learned_with_live_alarm'], n)}",
              "- alarms that fired most on them: " + (", ".join(f"{k} {v}" for k, v in
                                                           t["alarm_names_on_learned"].items()) or "none")]
    families = sorted({r["spec"]["family"] for r in rows})
    lines += ["", "| family | runs | learned, near best | critical | warning | not learned | crashed |",
              "|---|---|---|---|---|---|---|"]
    for fam in families:
        rs = [r for r in rows if r["spec"]["family"] == fam]
        ok = [r for r in rs if not r["error"] and r["learned"]]
        lines.append(f"| {fam} | {len(rs)} | {len(ok)} | {sum(bool(alarms(r, 'critical')) for r in ok)} | "
                     f"{sum(bool(alarms(r, 'warning')) for r in ok)} | "
                     f"{sum(1 for r in rs if not r['error'] and not r['learned'])} | {sum(bool(r['error']) for r in rs)} |")
    lines += ["", f"did not learn (or ended worse than their best): {t['not_learned']}"]
    for r in rows:
        if not r["error"] and not r["learned"]:
            lines.append(f"- run {r['id']} {r['config']}: {r['outcome']}; findings: "
                         + (", ".join(f"{f['name']} ({f['severity']})" for f in r["findings"]) or "none"))
    if t["crashed"]:
        lines += ["", f"crashed: {t['crashed']}"]
        lines += [f"- run {r['id']} {r['config']}: {r['error']}" for r in rows if r["error"]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200, help="runs drawn (default 200)")
    parser.add_argument("--seed", type=int, default=None, help="the draw to repeat (default: a fresh one)")
    parser.add_argument("--workers", type=int, default=2, help="runs trained at once (one thread each)")
    parser.add_argument("--out", type=Path, default=None, help="default: outputs/bench_false_alarms/SEED")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else secrets.randbelow(10**6)
    out = (args.out or ROOT / "outputs" / "bench_false_alarms" / str(seed)).resolve()
    print(f"seed: {seed}  (python -m bench.false_alarms --seed {seed} repeats this draw)")
    print(f"out: {out}")
    print("working space:\n" + describe_space() + "\n", flush=True)
    specs = [draw_run(seed, i) for i in range(args.runs)]
    out.mkdir(parents=True, exist_ok=True)
    os.environ["OMP_NUM_THREADS"] = "1"  # the spawned workers' torch reads it at import
    started = time.monotonic()
    rows = run_all(specs, out, max(1, args.workers))
    seconds = time.monotonic() - started
    (out / "results.json").write_text(json.dumps({"seed": seed, "space": describe_space(), "totals": totals(rows),
                                                  "seconds": round(seconds, 1), "runs": rows}, indent=1))
    print()
    print(report(rows, seed, seconds))
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
