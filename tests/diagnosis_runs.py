"""A healthy synthetic run and the ways the diagnosis tests bend it: each rule family's tests
(tests/test_diagnosis_*.py) write one and read what the rules say of it."""
from __future__ import annotations

import copy
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

from conftest import ROOT
from harness.diagnosis import Finding, diagnose, load_run


STEPS = list(range(10, 410, 10))  # 40 logged updates of a 400-step run
EVAL_STEPS = [100, 200, 300, 400]
LAYERS = ["stem.0.weight", "hidden.0.linear.weight", "hidden.0.linear.bias", "hidden.1.linear.weight",
          "hidden.1.linear.bias", "hidden.2.linear.weight", "hidden.2.linear.bias", "head.weight"]
CHANCE = math.log(10)


class Run:
    """A healthy 400-step run of a ReLU MLP on a 10-class task; tests bend one thing and write it."""

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.config = {"clip": 1.0, "clip_mode": "norm", "accum": 1, "accum_reduction": "mean", "batch_size": 32,
                       "trainer": {"max_steps": 400, "log_every": 10, "eval_every": 100},
                       "schedule": {"name": "cosine", "warmup": 20, "min_lr_ratio": 0.1},
                       "precision": {"name": "fp32"}, "optim": {"lr": 1e-3},
                       "model": {"activation": "relu", "residual": False, "depth": 4},
                       "guard": {"skip_nonfinite": True, "spike_zscore": 6.0}}
        self.summary = {"status": "completed", "reason": None, "steps": 400, "max_steps": 400,
                        "best_val_loss": None, "final_val_loss": None, "final_train_loss": None,
                        "best_val_accuracy": 0.8, "skipped_steps": 0, "overflow_steps": 0, "events": [],
                        "task": "classification", "chance_loss": CHANCE, "optimum_loss": 0.0}
        self.train = []
        for step in STEPS:
            loss = 0.5 + 1.8 * math.exp(-step / 120) + rng.normal(0, 0.02)
            pre = 0.8 + 0.2 * rng.random()
            row = {"step": step, "kind": "train", "train/loss": loss, "train/lr": self.cosine_lr(step),
                   "grad/norm_preclip": pre, "grad/norm_postclip": pre, "grad/clip_rate": 0.0,
                   "train/skipped_steps": 0.0, "perf/step_time_ms": 5.0, "perf/samples_per_s": 6400.0}
            for name in LAYERS:
                row[f"grad_norm/{name}"] = 0.1 * (1 + 0.2 * rng.random())
                row[f"param_norm/{name}"] = 5.0
                row[f"update_ratio/{name}"] = 1e-3
            row["param/norm_total"] = 20 + 3 * (1 - math.exp(-step / 100))
            for module in ("stem.1", "hidden.0.act", "hidden.1.act", "hidden.2.act"):
                row[f"act_dead/{module}"] = 0.05
            self.train.append(row)
        self.evals = [{"step": s, "kind": "eval", "val/loss": 0.55 + 1.8 * math.exp(-s / 120), "val/accuracy": 0.8}
                      for s in EVAL_STEPS]

    @staticmethod
    def loss_at(step: int) -> float:
        return 0.5 + 1.8 * math.exp(-step / 120)

    @staticmethod
    def cosine_lr(step: int, total: int = 400, warmup: int = 20) -> float:
        if step < warmup:
            return 1e-3 * step / warmup
        return 1e-4 + 0.9e-3 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup)))

    def val_follows_train(self) -> Run:
        """The val loss where the train loss is at each eval: a model hurt as a whole, not a train
        loss lifted by a few samples while the model keeps improving."""
        at = {row["step"]: row["train/loss"] for row in self.train}
        return self.set("val/loss", lambda s, v: at.get(s, v) + 0.05, kind="eval")

    def set(self, key: str, values, kind: str = "train") -> Run:
        """Replace one metric: `values` is a list (one per row) or a function of (step, old value)."""
        rows = self.train if kind == "train" else self.evals
        for i, row in enumerate(rows):
            row[key] = values(row["step"], row.get(key)) if callable(values) else values[i]
        return self

    def write(self, run_dir: Path) -> Path:
        run_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(OmegaConf.create(self.config), run_dir / "config.yaml")
        summary = copy.deepcopy(self.summary)
        finite_val = [r["val/loss"] for r in self.evals if math.isfinite(r["val/loss"])]
        summary["best_val_loss"] = summary["best_val_loss"] or (min(finite_val) if finite_val else None)
        (run_dir / "summary.json").write_text(json.dumps(summary))
        rows = sorted(self.train + self.evals, key=lambda r: (r["step"], r["kind"] == "eval"))
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        return run_dir

    def findings(self, tmp_path: Path) -> dict[str, Finding]:
        return {f.name: f for f in diagnose(load_run(self.write(tmp_path / "run")))}


# ---------------------------------------------------------------------------- the healthy baseline


# ---------------------------------------------------------------------------- loss-curve rules


PRIOR = 1.5  # the targets' entropy on an unbalanced 10-class task, well below ln 10 = 2.30


def fmt_in(value: float, text: str) -> bool:
    return f"{value:.3g}" in text


def bumps(step: int, value: float) -> float:
    """Three climbs of +60% over three log points each, on top of the healthy curve."""
    return value * 1.6 if step in (100, 110, 120, 200, 210, 220, 300, 310, 320) else value


def steady_then_rising(rise: float, wobble: float) -> list[float]:
    """Twelve evals: the best at the third, then a steady climb to +`rise`, each eval off by +-`wobble`."""
    trend = [1.3, 1.1, 1.0] + [1.0 + rise * i / 8 for i in range(1, 10)]
    return [v * (1 + wobble * (-1) ** i) for i, v in enumerate(trend)]


def slow(run: Run) -> Run:
    """An LM run far from the prior, its loss creeping down by 0.5% per eval to the end."""
    run.set("train/loss", lambda s, v: 4.8 - 0.0005 * s).set("val/loss", lambda s, v: 4.8 - 0.0005 * s, kind="eval")
    run.summary.update(prior_loss=3.2, chance_loss=5.4, optimum_loss=None, best_val_accuracy=None)
    return run


def moving_slowly(ratio: float, val: list[float]) -> Run:
    """A batch-norm CNN 10x below its working LR: its loss leaves the prior behind and keeps falling."""
    run = Run().set("val/loss", val, kind="eval")
    run.summary["modules"] = ["BatchNorm2d", "Conv2d", "Linear", "ReLU"]
    for name in LAYERS:
        run.set(f"update_ratio/{name}", lambda s, v: ratio)
    return run


def unfinished(val: list[float], constant_lr: bool = True) -> Run:
    """Healthy-sized updates (1e-3, the Run's own), its val loss still falling at the end."""
    run = Run().set("val/loss", val, kind="eval")
    if constant_lr:
        run.config["schedule"] = {"name": "constant", "warmup": 0}
        run.set("train/lr", lambda s, v: 1e-3)
    return run


# ---------------------------------------------------------------------------- gradient rules


def exploding(run: Run, burst: float) -> Run:
    rng = np.random.default_rng(1)
    return run.set("grad/norm_max", lambda s, v: burst if s in (250, 330) else 1.0 + 2 * rng.random())


def with_epochs(run: Run, steps_per_epoch: int, jump: float) -> Run:
    """Epochs of `steps_per_epoch` updates; the loss is `jump`x higher in each epoch's first window."""
    run.set("train/epoch", lambda s, v: s / steps_per_epoch)
    return run.set("train/loss", lambda s, v: v * jump if s % steps_per_epoch == 10 and s > steps_per_epoch else v)


# ---------------------------------------------------------------------------- numerics and guard events
def fp16(run: Run, loss_scaling: bool) -> Run:
    run.config["precision"] = {"name": "fp16", "init_scale": 65536.0, "growth_interval": 2000,
                               "loss_scaling": loss_scaling}
    return run


# ---------------------------------------------------------------------------- the catalogue's setup mistakes


def shrinking(run: Run, factor: float) -> Run:
    return run.set("param_norm/stem.0.weight", lambda s, v: 5.0 * factor ** (s / 400)).set(
        "param_norm/head.weight", lambda s, v: 5.0 * factor ** (s / 400))


def entropy_run(end_share: float) -> Run:
    run = Run()
    for head in range(4):
        run.set(f"attn_entropy/layer0/head{head}", lambda s, v: 2.5 * (1 - (1 - end_share) * s / 400))
    return run


PRICES = [float(v) for v in np.percentile(np.random.default_rng(0).normal(2e5, 5e4, 4096), np.arange(101))]
STANDARD = [float(v) for v in np.percentile(np.random.default_rng(0).normal(0.0, 1.0, 4096), np.arange(101))]


# ---------------------------------------------------------------------------- loading and the report


# ---------------------------------------------------------------------------- scripts/diagnose.py
def diagnose_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "diagnose.py"), *args],
                          capture_output=True, text=True, timeout=120)


def outlying_targets(run: Run) -> Run:
    run.summary.update({"task": "regression", "chance_loss": None, "prior_loss": 1.0})
    run.summary["target_outliers"] = {"checked": 5000, "count": 50, "quartiles": [-0.4, 0.4],
                                      "samples": [{"index": 3074, "target": 1280.0}]}
    return run


# ---------------------------------------------------------------------------- the user's own objective

def _objective_run(kl: list[float], recon: list[float], ranks: list[float] | None = None,
                   initial_rank: float | None = None) -> Run:
    """A user objective's run: its parts (and the embeddings' effective rank) on the eval rows."""
    run = Run()
    run.summary.update(user_loss="mypkg.elbo", chance_loss=None, optimum_loss=None,
                       initial_effective_rank=initial_rank)
    for i, row in enumerate(run.evals):
        row.pop("val/accuracy")
        row.update({"val/loss/kl": kl[i], "val/loss/reconstruction": recon[i], "val/loss": kl[i] + recon[i]})
        if ranks is not None:
            row["val/effective_rank"] = ranks[i]
    return run
