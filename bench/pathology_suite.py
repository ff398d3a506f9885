"""Score the diagnosis on sick and healthy runs that the rules were not written against.

    python -m bench.pathology_suite --part heldout          # train and score the held-out part
    python -m bench.pathology_suite --part dev --only diverging
    python -m bench.pathology_suite --rescore outputs/pathology_suite/heldout   # re-diagnose, no training
    python -m bench.pathology_suite --list

Every case varies family (GPT, MLP, char RNN, ResNet, user models through `model._target_`),
size, optimizer, schedule, precision, data and seed around one pathology class, and records the
cause expected before it runs. A third of each class is the dev part (rules are tuned on it);
the rest is held out (only scored). A sick case counts as named when a finding that names its
cause is the report's first finding or is critical; a healthy case is clean when it has no
warning or critical finding. A sick case whose own outcome contradicts its cause (OUTCOME_CAUSES:
it learned and ended near its best) is invalid, listed apart and left out of the valid score. The
live check's alarms (`diagnosis` events while training) are counted on healthy runs too.

Each run trains in a process of its own, `--workers` at a time, one thread each, under --out
(default outputs/pathology_suite/PART); results.json and results.md land there.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path


from harness.entry.cli import fail
from harness.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]

HEALTHY = "healthy"
RESULT_FILE = "suite_result.json"
CASE_TIMEOUT = 600.0  # seconds; the slowest case takes ~30 s on two loaded cores
DEV_EVERY = 3  # every third case of a class (in hash order) is dev, the rest held out
CURRENT_DRAW = 5  # the redrawing that scored the rules as they stand (draws 1, 2 and 4 were tuned on; 3 scored older rules)


# Causes whose definition is a bad outcome: a loss that blows up, a val loss that climbs away from
# its best, a model held at chance or the prior. A case of one whose run learned and ended near its
# best did not show its cause, whatever one window of its curves did: it is invalid, scored apart
# with its outcome recorded, as an external twin that learned is.
OUTCOME_CAUSES = frozenset({"diverging", "overfitting", "plateau_at_chance", "plateau_at_prior"})


@dataclass(frozen=True)
class Case:
    name: str  # "<class>/<variant>", unique
    cause: str  # the pathology class, or "healthy"
    overrides: tuple[str, ...]
    expect: tuple[str, ...] = ()  # finding names that name the cause
    mention: str = ""  # ... or any finding whose fix names this setting (a cause only the fix text can name)
    batch: str = ""  # forms of a class added later are split into dev and held-out among themselves

    @property
    def sick(self) -> bool:
        return self.cause != HEALTHY


# Shared by every case: no TensorBoard, no end-of-run report (the suite diagnoses itself), the
# live check on; logs and per-layer statistics every 5 steps so short runs have curves.
COMMON = ("logger=none", "diagnose.report=false", "trainer.log_every=5", "monitor.every=5",
          "trainer.eval_batches=8")
MLP = ("model=mlp", "data=synthetic")
GPT = ("model=gpt", "data=stdlib", "model.n_layer=2", "model.n_embd=64", "model.n_head=4", "model.block_size=32",
       "batch_size=16")
RNN = ("model=rnn", "data=stdlib", "model.hidden=64", "model.n_embd=32", "model.n_layer=1", "model.block_size=32",
       "batch_size=16")
RESNET = ("model=resnet", "data=digits", "model.width=8")
USER_NET = ("model=mlp", "data=synthetic", "model._target_=bench.suite_models.Net")
USER_LM = ("data=stdlib", "model._target_=bench.suite_models.CharRNN", "model.block_size=32", "batch_size=16")
SKEWED = ("data=custom", "data._target_=bench.suite_models.skewed_blobs")
FUNCTIONAL_NET = ("model=mlp", "data=synthetic", "model._target_=bench.suite_models.FunctionalNet")
OUTLIERS = ("model=mlp", "data=custom", "data._target_=bench.suite_models.blobs_with_outliers")
RAW_FEATURES = ("model=mlp", "data=custom", "data._target_=bench.suite_models.raw_feature_blobs")
APART = ("data=custom", "data._target_=bench.suite_models.digits_prepared_apart", "data.num_classes=10")
LEAKY = ("model=mlp", "data=custom", "data._target_=bench.suite_models.leaky_blobs", "model.width=128", "optim.weight_decay=0.0",
         "batch_size=32")
TASKS = ("data=digits", "model._target_=bench.suite_models.SharedTrunk", "loss._target_=bench.suite_models.two_tasks")
VIEWS = ("data=custom", "data._target_=bench.suite_models.cluster_views", "data.task=null",
         "model._target_=bench.suite_models.Siamese")
ALIGNED = (*VIEWS, "loss._target_=bench.suite_models.alignment_only")  # no term keeps different inputs apart
FULL = ("monitor=full", "monitor.every=5")
NO_CLIP = "clip=null"
VAE = ("data=digits", "model._target_=bench.suite_models.GaussianVAE", "loss._target_=bench.suite_models.elbo", NO_CLIP)


def steps(n: int, evals: int = 6) -> tuple[str, ...]:
    return (f"trainer.max_steps={n}", f"trainer.eval_every={max(n // evals, 1)}", f"trainer.ckpt_every={n}")


def sick(cause: str, expect: tuple[str, ...], variants: dict[str, tuple[str, ...]], mention: str = "",
         suffix: str = "") -> list[Case]:
    """The cases of one class; `suffix` marks a later batch of forms of a class (its own dev/held-out split)."""
    return [Case(f"{cause}/{v}", cause, (*COMMON, *o), expect, mention, suffix) for v, o in variants.items()]


def catalogue() -> list[Case]:
    """Every case of the suite, dev and held-out alike."""
    c = NO_CLIP
    return [
        *sick("diverging", ("diverging",), {
            "mlp-sgd-lr2": (*MLP, "optim=sgd", "optim.lr=2.0", "schedule=constant", c, *steps(100)),
            "mlp-sgd-lr5-guard": (*MLP, "optim=sgd", "optim.lr=5.0", "schedule=constant", c, *steps(100)),
            "mlp-adamw-lr0.3": (*MLP, "optim.lr=0.3", "schedule=constant", c, "guard=off", *steps(100)),
            "mlp-adamw-lr1-gelu": (*MLP, "model.activation=gelu", "optim.lr=1.0", "schedule=constant", c,
                                   *steps(100)),
            "mlp-lion-lr0.1": (*MLP, "optim=lion", "optim.lr=0.1", "schedule=constant", c, *steps(100)),
            "gpt-adamw-lr0.1": (*GPT, "optim.lr=0.1", "schedule=constant", c, "guard=off", *steps(150)),
            "gpt-adamw-lr0.3-cosine": (*GPT, "optim.lr=0.3", "schedule.warmup=0", c, *steps(150)),
            "gpt-sgd-lr30": (*GPT, "optim=sgd", "optim.lr=30", "schedule=constant", c, *steps(150)),
            "user-net-adam-lr1": (*USER_NET, "optim=adam", "optim.lr=1.0", "schedule=constant", c, *steps(100)),
            "rnn-adamw-lr0.3": (*RNN, "optim.lr=0.3", "schedule=constant", c, "guard=off", *steps(150)),
            "user-lm-sgd-lr50": (*USER_LM, "optim=sgd", "optim.lr=50", "schedule=constant", c, *steps(150)),
        }),
        *sick("plateau_at_chance", ("plateau_at_chance", "plateau_at_prior"), {
            "mlp-k10-adamw": (*MLP, "data.shuffle_labels=true", *steps(150)),
            "mlp-k4-sgd": (*MLP, "data.shuffle_labels=true", "data.num_classes=4", "optim=sgd", *steps(150)),
            "mlp-k50-wide": (*MLP, "data.shuffle_labels=true", "data.num_classes=50", "model.width=128",
                             *steps(150)),
            "mlp-k2-lion": (*MLP, "data.shuffle_labels=true", "data.num_classes=2", "optim=lion", "optim.lr=3e-4",
                            *steps(150)),
            "user-net-k10": (*USER_NET, "data.shuffle_labels=true", *steps(150)),
            "user-net-k20-seed7": (*USER_NET, "data.shuffle_labels=true", "data.num_classes=20", "seed=7",
                                   *steps(200)),
            "mlp-k10-bf16": (*MLP, "data.shuffle_labels=true", "precision=bf16", "schedule=constant", *steps(120)),
        }),
        *sick("plateau_at_prior", ("plateau_at_prior",), {
            "position-lm-adamw": (*USER_LM, "model._target_=bench.suite_models.PositionOnlyLM", "optim.lr=3e-3",
                                  *steps(200)),
            "position-lm-sgd": (*USER_LM, "model._target_=bench.suite_models.PositionOnlyLM", "optim=sgd", "optim.lr=0.5",
                                *steps(200)),
            "position-lm-lion-b16": (*USER_LM, "model._target_=bench.suite_models.PositionOnlyLM", "model.block_size=16",
                                     "optim=lion", "optim.lr=1e-3", *steps(200)),
            "blind-net-skewed-adamw": (*SKEWED, "model._target_=bench.suite_models.InputBlindNet", *steps(150)),
            "blind-net-skewed-sgd": (*SKEWED, "model._target_=bench.suite_models.InputBlindNet", "optim=sgd",
                                     "+data.classes=6", *steps(150)),
            "blind-net-skewed-k12": (*SKEWED, "model._target_=bench.suite_models.InputBlindNet", "+data.classes=12",
                                     "seed=3", *steps(150)),
            "position-lm-wide-cosine": (*USER_LM, "model._target_=bench.suite_models.PositionOnlyLM", "+model.hidden=128",
                                        "optim.lr=1e-2", *steps(250)),
        }),
        *sick("slow_progress", ("slow_progress", "underfitting"), {
            "gpt-adamw-lr3e-5": (*GPT, "optim.lr=3e-5", *steps(300)),
            "gpt-adamw-lr1e-5-constant": (*GPT, "optim.lr=1e-5", "schedule=constant", *steps(300)),
            "mlp-sgd-lr1e-3": (*MLP, "optim=sgd", "optim.lr=1e-3", "optim.momentum=0.0",
                               "optim.nesterov=false", *steps(300)),
            "mlp-adamw-lr1e-5": (*MLP, "optim.lr=1e-5", *steps(300)),
            "rnn-adamw-lr1e-4": (*RNN, "optim.lr=1e-4", *steps(300)),
            "user-net-sgd-lr3e-3": (*USER_NET, "optim=sgd", "optim.lr=3e-3", "optim.momentum=0.0",
                                    "optim.nesterov=false", *steps(300)),
            "user-lm-adamw-lr3e-5": (*USER_LM, "optim.lr=3e-5", *steps(300)),
            "mlp-lion-lr1e-6": (*MLP, "optim=lion", "optim.lr=1e-6", *steps(300)),
        }),
        *sick("oscillating", ("oscillating", "diverging"), {
            "mlp-sgd-lr0.5": (*MLP, "model.activation=gelu", "optim=sgd", "optim.lr=0.5", "schedule=constant", c,
                              *steps(200)),
            "mlp-adamw-lr0.05": (*MLP, "optim.lr=0.05", "schedule=constant", c, *steps(200)),
            "gpt-adamw-lr0.03": (*GPT, "optim.lr=0.03", "schedule=constant", c, *steps(200)),
            "user-net-adam-lr0.1": (*USER_NET, "optim=adam", "optim.lr=0.1", "schedule=constant", c, *steps(200)),
            "rnn-sgd-lr5": (*RNN, "optim=sgd", "optim.lr=5.0", "schedule=constant", c, *steps(200)),
            "mlp-lion-lr0.01": (*MLP, "optim=lion", "optim.lr=0.01", "schedule=constant", c, *steps(200)),
        }),
        *sick("overfitting", ("overfitting",), {
            "mlp-n64-w256": (*MLP, "data.n_train=64", "model.width=256", "optim.weight_decay=0.0", "schedule.warmup=20",
                             "trainer.eval_every=20", "trainer.max_steps=300", "trainer.ckpt_every=300"),
            "mlp-n128-w512": (*MLP, "data.n_train=128", "model.width=512", "optim.weight_decay=0.0",
                              "trainer.eval_every=25", "trainer.max_steps=400", "trainer.ckpt_every=400"),
            "mlp-n64-sgd": (*MLP, "data.n_train=64", "model.width=256", "optim=sgd", "optim.lr=0.1",
                            "optim.weight_decay=0.0", "trainer.eval_every=20", "trainer.max_steps=300",
                            "trainer.ckpt_every=300"),
            "user-net-n64": (*USER_NET, "data.n_train=64", "+model.hidden=256", "trainer.eval_every=20",
                             "trainer.max_steps=300", "trainer.ckpt_every=300"),
            "user-net-n96-gelu-seed5": (*USER_NET, "data.n_train=96", "+model.hidden=256", "+model.act=gelu", "seed=5",
                                        "trainer.eval_every=25", "trainer.max_steps=400", "trainer.ckpt_every=400"),
            "mlp-regression-n64": (*MLP, "data.task=regression", "data.n_train=64", "model.width=256",
                                   "optim.weight_decay=0.0", "trainer.eval_every=25", "trainer.max_steps=400",
                                   "trainer.ckpt_every=400"),
            "mlp-n64-bf16": (*MLP, "data.n_train=64", "model.width=256", "precision=bf16", "optim.weight_decay=0.0",
                             "trainer.eval_every=20", "trainer.max_steps=300", "trainer.ckpt_every=300"),
        }),
        *sick("underfitting", ("underfitting", "capacity_limit"), {
            "mlp-w3": (*MLP, "model.width=3", "model.depth=1", "optim.lr=3e-3", *steps(400)),
            "mlp-w2-sgd": (*MLP, "model.width=2", "model.depth=1", "optim=sgd", *steps(400)),
            "mlp-w4-k20": (*MLP, "model.width=4", "model.depth=1", "data.num_classes=20", *steps(400)),
            "user-net-h2": (*USER_NET, "+model.hidden=2", "model.depth=1", *steps(400)),
            "user-net-h3-lion": (*USER_NET, "+model.hidden=3", "model.depth=1", "optim=lion", "optim.lr=1e-3",
                                 *steps(400)),
            "mlp-w2-bf16-seed9": (*MLP, "model.width=2", "model.depth=1", "precision=bf16", "seed=9", *steps(400)),
        }),
        *sick("vanishing_gradients", ("vanishing_gradients",), {
            "mlp-sigmoid-d10": (*MLP, "model.depth=10", "model.activation=sigmoid", "schedule=constant", *steps(100)),
            "mlp-sigmoid-d8-sgd": (*MLP, "model.depth=8", "model.activation=sigmoid", "optim=sgd", *steps(100)),
            "mlp-sigmoid-d12-w128": (*MLP, "model.depth=12", "model.width=128", "model.activation=sigmoid",
                                     *steps(100)),
            "user-net-sigmoid-d10": (*USER_NET, "model.depth=10", "+model.act=sigmoid", *steps(100)),
            "gpt-post-ln-l8": (*GPT, "model.n_layer=8", "model.ln_position=post", "optim.lr=3e-3", "schedule=constant",
                               c, "guard=off", *steps(60)),
            "gpt-post-ln-l6-lr1e-2": (*GPT, "model.n_layer=6", "model.ln_position=post", "optim.lr=1e-2",
                                      "schedule=constant", c, *steps(60)),
            "resnet-plain-deep": (*RESNET, "model.blocks_per_stage=4", "model.residual=false", "model.norm=none",
                                  *steps(100)),
            "user-net-sigmoid-d12-sgd": (*USER_NET, "model.depth=12", "+model.act=sigmoid", "optim=sgd",
                                         *steps(100)),
        }),
        *sick("exploding_gradients", ("exploding_gradients", "diverging"), {
            "rnn-tanh-sgd-lr0.5": (*RNN, "model.cell=rnn", "model.hidden=256", "optim=sgd", "optim.lr=0.5",
                                   "schedule=constant", c, "guard=off", *steps(150)),
            "rnn-tanh-sgd-lr1": (*RNN, "model.cell=rnn", "model.hidden=128", "optim=sgd", "optim.lr=1.0",
                                 "schedule=constant", c, *steps(150)),
            "user-rnn-sgd-lr0.5": (*USER_LM, "+model.cell=rnn", "+model.hidden=256", "optim=sgd", "optim.lr=0.5",
                                   "schedule=constant", c, *steps(150)),
            "rnn-tanh-b64-seed4": (*RNN, "model.cell=rnn", "model.hidden=256", "model.block_size=64", "optim=sgd",
                                   "optim.lr=0.5", "schedule=constant", c, "seed=4", *steps(150)),
            "user-rnn-sgd-lr1-h128": (*USER_LM, "+model.cell=rnn", "+model.hidden=128", "optim=sgd", "optim.lr=1.0",
                                      "schedule=constant", c, *steps(150)),
            "rnn-tanh-sgd-cosine": (*RNN, "model.cell=rnn", "model.hidden=256", "optim=sgd", "optim.lr=0.7", c,
                                    *steps(150)),
        }),
        *sick("dead_relu", ("dead_relu",), {
            "mlp-adamw-lr0.1-full": (*MLP, "monitor=full", "monitor.every=5", "optim.lr=0.1", "schedule=constant", c,
                                     "guard=off", *steps(80)),
            "mlp-adamw-lr0.1-basic": (*MLP, "optim.lr=0.1", "schedule=constant", c, "guard=off", *steps(80)),
            "mlp-adam-lr0.2-w128": (*MLP, "model.width=128", "optim=adam", "optim.lr=0.2", "schedule=constant", c,
                                    *steps(80)),
            "user-net-adamw-lr0.1": (*USER_NET, "optim.lr=0.1", "schedule=constant", c, "guard=off", *steps(80)),
            "user-net-adam-lr0.3-d3": (*USER_NET, "model.depth=3", "optim=adam", "optim.lr=0.3",
                                       "schedule=constant", c, *steps(80)),
            "mlp-lion-lr0.05-full": (*MLP, "monitor=full", "monitor.every=5", "optim=lion", "optim.lr=0.05",
                                     "schedule=constant", c, *steps(80)),
            "mlp-adamw-lr0.1-d4-seed2": (*MLP, "model.depth=4", "optim.lr=0.1", "schedule=constant", c, "seed=2",
                                         *steps(80)),
        }),
        *sick("clip_pinned", ("clip_pinned",), {
            "mlp-sgd-1e-4": (*MLP, "optim=sgd", "clip=1e-4", "schedule=constant", *steps(100)),
            "mlp-sgd-1e-3-w128": (*MLP, "optim=sgd", "clip=1e-3", "model.width=128", *steps(100)),
            "mlp-adamw-1e-3": (*MLP, "clip=1e-3", *steps(100)),
            "gpt-adamw-1e-3": (*GPT, "clip=1e-3", *steps(100)),
            "user-net-sgd-1e-4": (*USER_NET, "optim=sgd", "clip=1e-4", *steps(100)),
            "rnn-adamw-1e-3": (*RNN, "clip=1e-3", *steps(100)),
        }),
        *sick("clip_never_reached", ("clip_never_reached",), {
            "mlp-clip1e4": (*MLP, "clip=1e4", *steps(150)),
            "gpt-clip1e3": (*GPT, "clip=1e3", *steps(150)),
            "user-net-clip1e4-sgd": (*USER_NET, "clip=1e4", "optim=sgd", *steps(150)),
            "rnn-clip1e4": (*RNN, "clip=1e4", "optim.lr=3e-3", *steps(150)),
        }),
        *sick("fp16_underflow", ("fp16_underflow",), {
            "mlp-sigmoid-d8": (*MLP, "precision=fp16", "precision.loss_scaling=false", "model.depth=8",
                               "model.activation=sigmoid", "schedule=constant", "guard=off", *steps(60)),
            "mlp-sigmoid-d6-sgd": (*MLP, "precision=fp16", "precision.loss_scaling=false", "model.depth=6",
                                   "model.activation=sigmoid", "optim=sgd", *steps(60)),
            "user-net-sigmoid-d8": (*USER_NET, "precision=fp16", "precision.loss_scaling=false", "model.depth=8",
                                    "+model.act=sigmoid", *steps(60)),
            "mlp-sigmoid-d10-w128": (*MLP, "precision=fp16", "precision.loss_scaling=false", "model.depth=10",
                                     "model.width=128", "model.activation=sigmoid", *steps(60)),
            "user-net-sigmoid-d7-seed3": (*USER_NET, "precision=fp16", "precision.loss_scaling=false",
                                          "model.depth=7", "+model.act=sigmoid", "seed=3", *steps(60)),
        }),
        *sick("schedule_ended_early", ("schedule_ended_early",), {
            "mlp-poly8": (*MLP, "schedule=poly", "schedule.power=8", *steps(200)),
            "gpt-poly10": (*GPT, "schedule=poly", "schedule.power=10", *steps(200)),
            "user-net-poly6-sgd": (*USER_NET, "schedule=poly", "schedule.power=6", "optim=sgd", *steps(200)),
            "rnn-poly8": (*RNN, "schedule=poly", "schedule.power=8", "optim.lr=3e-3", *steps(200)),
            "mlp-poly12-lion": (*MLP, "schedule=poly", "schedule.power=12", "optim=lion", "optim.lr=1e-3",
                                *steps(200)),
        }),
        *sick("accum_sum", (), {
            "mlp-sgd-accum8": (*MLP, "model.activation=gelu", "optim=sgd", "optim.lr=0.3", "accum=8",
                               "accum_reduction=sum", "schedule=constant", c, "guard=off", *steps(100)),
            "mlp-sgd-accum16-clip": (*MLP, "optim=sgd", "optim.lr=0.1", "accum=16", "accum_reduction=sum",
                                     "schedule=constant", *steps(100)),
            "user-net-sgd-accum8": (*USER_NET, "optim=sgd", "optim.lr=0.3", "accum=8", "accum_reduction=sum",
                                    "schedule=constant", c, *steps(100)),
            "gpt-sgd-accum8": (*GPT, "optim=sgd", "optim.lr=1.0", "accum=8", "accum_reduction=sum", c,
                               *steps(100)),
            "mlp-sgd-accum8-w128-seed6": (*MLP, "model.width=128", "optim=sgd", "optim.lr=0.3", "accum=8",
                                          "accum_reduction=sum", "schedule=constant", c, "seed=6", *steps(100)),
            "user-net-sgd-accum4-clip": (*USER_NET, "optim=sgd", "optim.lr=0.5", "accum=4", "accum_reduction=sum",
                                         *steps(100)),
        }, mention="accum_reduction"),
        *sick("unused_parameters", ("unused_parameters",), {
            "spare-head-adamw": (*USER_NET, "model._target_=bench.suite_models.SpareHeadNet", *steps(150)),
            "spare-head-sgd": (*USER_NET, "model._target_=bench.suite_models.SpareHeadNet", "optim=sgd", *steps(150)),
            "detached-branch": (*USER_NET, "model._target_=bench.suite_models.DetachedBranchNet", *steps(150)),
            "detached-branch-lion": (*USER_NET, "model._target_=bench.suite_models.DetachedBranchNet", "optim=lion",
                                     "optim.lr=3e-4", *steps(150)),
            "user-lm-spare": (*USER_LM, "+model.spare=true", "optim.lr=3e-3", *steps(150)),
        }),
        *sick("bn_eval_gap", ("bn_eval_gap",), {
            "resnet-momentum1e-3": (*RESNET, "model.bn_momentum=0.001", *steps(150)),
            "resnet-momentum3e-3-w16": (*RESNET, "model.width=16", "model.bn_momentum=0.003", *steps(150)),
            "resnet-momentum1e-3-sgd": (*RESNET, "model.bn_momentum=0.001", "optim=sgd", *steps(150)),
        }),
        *sick("epoch_boundary_jumps", ("epoch_boundary_jumps",), {
            "mlp-regression-sorted": (*MLP, "data.task=regression", "data.n_train=1024", "data.sort_by_target=true",
                                      "data.shuffle=false", "optim.lr=3e-3", "schedule=constant",
                                      "trainer.log_every=4", *steps(320, evals=4)),
            "mlp-classes-sorted": (*MLP, "data.n_train=1024", "data.sort_by_target=true", "data.shuffle=false",
                                   "optim.lr=3e-3", "schedule=constant", "trainer.log_every=4", *steps(320, evals=4)),
            "user-net-regression-sorted": (*USER_NET, "data.task=regression", "data.n_train=1024",
                                           "data.sort_by_target=true", "data.shuffle=false", "schedule=constant",
                                           "trainer.log_every=4", *steps(320, evals=4)),
            "mlp-regression-sorted-n2048-sgd": (*MLP, "data.task=regression", "data.n_train=2048",
                                                "data.sort_by_target=true", "data.shuffle=false", "optim=sgd",
                                                "optim.lr=0.01", "schedule=constant", "trainer.log_every=4",
                                                *steps(384, evals=4)),
        }),
        *sick("weight_decay_collapse", ("weight_decay_collapse",), {
            "mlp-adamw-wd30": (*MLP, "optim.weight_decay=30", *steps(300)),
            "gpt-adamw-wd20-decay-all": (*GPT, "optim.weight_decay=20", "optim.no_decay=[]", "schedule=constant", *steps(300)),
            "user-net-adamw-wd50": (*USER_NET, "optim.weight_decay=50", *steps(300)),
            "mlp-sgd-wd1": (*MLP, "optim=sgd", "optim.weight_decay=1.0", *steps(300)),
            "rnn-adamw-wd20": (*RNN, "optim.lr=3e-3", "optim.weight_decay=20", *steps(300)),
            "user-lm-lion-wd300": (*USER_LM, "optim=lion", "optim.lr=3e-4", "optim.weight_decay=300",
                                   *steps(300)),
            "functional-net-adamw-wd40-seed4": (*FUNCTIONAL_NET, "optim.weight_decay=40", "seed=4", *steps(300)),
        }),
        *sick("warmup_too_long", ("warmup_too_long",), {
            "mlp-sgd-warmup0.9": (*MLP, "optim=sgd", "optim.lr=0.01", "schedule.warmup=0.9", *steps(300)),
            "gpt-adamw-warmup0.8": (*GPT, "optim.lr=3e-4", "schedule.warmup=0.8", *steps(300)),
            "user-net-sgd-warmup0.9-linear": (*USER_NET, "optim=sgd", "optim.lr=0.01", "schedule=linear",
                                              "schedule.warmup=0.9", *steps(300)),
            "rnn-adamw-warmup0.85": (*RNN, "optim.lr=1e-3", "schedule.warmup=0.85", *steps(300)),
            "user-lm-adamw-warmup240-constant": (*USER_LM, "optim.lr=1e-3", "schedule=constant",
                                                 "schedule.warmup=240", *steps(300)),
            "resnet-sgd-warmup0.9": (*RESNET, "optim=sgd", "optim.lr=0.01", "schedule.warmup=0.9", *steps(200)),
        }),
        *sick("outlier_samples", ("outlier_samples",), {
            "mlp-adamw-2pct-x1e3": (*OUTLIERS, *steps(200)),
            "user-net-sgd-3pct-x300": (*OUTLIERS, "model._target_=bench.suite_models.Net", "optim=sgd", "+data.share=0.03",
                                       "+data.scale=300", *steps(200)),
            "functional-net-adamw-1pct-x1e4": (*OUTLIERS, "model._target_=bench.suite_models.FunctionalNet",
                                               "+data.share=0.01", "+data.scale=1e4", *steps(200)),
            "mlp-lion-2pct-x1e3-constant": (*OUTLIERS, "optim=lion", "optim.lr=3e-4",
                                            "schedule=constant", *steps(200)),
            "user-net-adam-5pct-x1e3-seed5": (*OUTLIERS, "model._target_=bench.suite_models.Net", "optim=adam",
                                              "+data.share=0.05", "seed=5", *steps(200)),
            "mlp-sgd-2pct-x1e3-clip1": (*OUTLIERS, "optim=sgd", "clip=1.0", *steps(200)),
        }),
        *sick("unnormalised_inputs", ("unnormalised_inputs",), {
            "mlp-adamw-scale100": (*RAW_FEATURES, *steps(200)),
            "user-net-sgd-scale1000": (*RAW_FEATURES, "model._target_=bench.suite_models.Net", "optim=sgd",
                                       "+data.scale=1000", *steps(200)),
            "functional-net-adamw-scale300": (*RAW_FEATURES, "model._target_=bench.suite_models.FunctionalNet",
                                              "+data.scale=300", *steps(200)),
            "mlp-lion-scale100-offset500": (*RAW_FEATURES, "optim=lion", "optim.lr=3e-4",
                                            "+data.offset=500", *steps(200)),
            "user-net-adam-scale100-tanh": (*RAW_FEATURES, "model._target_=bench.suite_models.Net", "+model.act=tanh",
                                            "optim=adam", *steps(200)),
            "mlp-adamw-scale1000-k4-seed6": (*RAW_FEATURES, "+data.scale=1000", "+data.classes=4",
                                             "seed=6", *steps(200)),
        }),
        *sick("val_train_overlap", ("val_train_overlap",), {
            "mlp-adamw-all-leaked": (*LEAKY, *steps(300)),
            "user-net-sgd-half-leaked": (*LEAKY, "model._target_=bench.suite_models.Net", "optim=sgd",
                                         "+data.leaked=0.5", *steps(300)),
            "functional-net-adamw-30pct": (*LEAKY, "model._target_=bench.suite_models.FunctionalNet", "+data.leaked=0.3",
                                           *steps(300)),
            "mlp-lion-all-leaked-wide": (*LEAKY, "model.width=256", "optim=lion", "optim.lr=3e-4",
                                         *steps(300)),
            "user-net-adamw-20pct-seed3": (*LEAKY, "model._target_=bench.suite_models.Net", "+data.leaked=0.2", "seed=3",
                                           *steps(300)),
        }),
        *sick("split_mismatch", ("split_mismatch",), {
            "resnet-digits-labels-over-255": (*APART, "model=resnet", "model.width=8", *steps(200)),
            "user-net-digits-train-pixels-scaled": (*APART, "model=mlp", "model._target_=bench.suite_models.Net",
                                                    "+data.slip=pixels", *steps(200)),
            "mlp-digits-train-filtered": (*APART, "model=mlp", "+data.slip=filtered", *steps(200)),
            "mlp-sgd-digits-labels-over-255": (*APART, "model=mlp", "optim=sgd", *steps(200)),
            "resnet-digits-train-pixels-scaled-seed2": (*APART, "model=resnet", "model.width=8", "+data.slip=pixels",
                                                        "seed=2", *steps(200)),
        }),
        *sick("frozen_parameters", ("frozen_parameters",), {
            "frozen-body-adamw": (*USER_NET, "model._target_=bench.suite_models.FrozenBodyNet", *steps(200)),
            "frozen-body-sgd-d3": (*USER_NET, "model._target_=bench.suite_models.FrozenBodyNet", "model.depth=3",
                                   "optim=sgd", *steps(200)),
            "frozen-char-rnn": (*USER_LM, "model._target_=bench.suite_models.FrozenCharRNN", "optim.lr=3e-3",
                                *steps(200)),
            "frozen-body-lion-wide": (*USER_NET, "model._target_=bench.suite_models.FrozenBodyNet", "+model.hidden=256",
                                      "optim=lion", "optim.lr=3e-4", *steps(200)),
            "frozen-char-gru-seed8": (*USER_LM, "model._target_=bench.suite_models.FrozenCharRNN", "+model.cell=gru",
                                      "optim.lr=3e-3", "seed=8", *steps(200)),
        }),
        *sick("attention_entropy_collapse", ("attention_entropy_collapse",), {
            "gpt-adamw-lr1e-2": (*GPT, *FULL, "optim.lr=1e-2", "schedule=constant", c, *steps(300)),
            "gpt-adamw-lr2e-2-l4": (*GPT, *FULL, "model.n_layer=4", "optim.lr=2e-2", "schedule=constant", c,
                                    *steps(300)),
            "gpt-lion-lr3e-3": (*GPT, *FULL, "optim=lion", "optim.lr=3e-3", "schedule=constant", c, *steps(300)),
            "gpt-adamw-lr1e-2-cosine-b64": (*GPT, *FULL, "model.block_size=64", "optim.lr=1e-2", c, *steps(300)),
            "gpt-adam-lr1e-2-h8-seed9": (*GPT, *FULL, "model.n_head=8", "optim=adam", "optim.lr=1e-2",
                                         "schedule=constant", c, "seed=9", *steps(300)),
        }),
        *sick("capacity_limit", ("capacity_limit", "underfitting"), {
            "bottleneck2-k20-adamw": (*USER_NET, "model._target_=bench.suite_models.BottleneckNet", "data.num_classes=20",
                                      *steps(400)),
            "bottleneck1-k10-sgd": (*USER_NET, "model._target_=bench.suite_models.BottleneckNet", "+model.bottleneck=1",
                                    "optim=sgd", *steps(400)),
            "bottleneck2-k50-lion": (*USER_NET, "model._target_=bench.suite_models.BottleneckNet", "data.num_classes=50",
                                     "optim=lion", "optim.lr=1e-3", *steps(400)),
            "bottleneck2-k20-skewed": (*SKEWED, "model._target_=bench.suite_models.BottleneckNet", "+data.classes=20",
                                       *steps(400)),
            "bottleneck1-k20-adam-seed2": (*USER_NET, "model._target_=bench.suite_models.BottleneckNet",
                                           "+model.bottleneck=1", "data.num_classes=20", "optim=adam", "seed=2",
                                           *steps(400)),
        }),
        *sick("dead_relu", ("dead_relu",), {
            "functional-net-adamw-lr0.1": (*FUNCTIONAL_NET, "optim.lr=0.1", "schedule=constant", c, "guard=off",
                                           *steps(80)),
            "functional-net-adam-lr0.3-d3": (*FUNCTIONAL_NET, "model.depth=3", "optim=adam", "optim.lr=0.3",
                                             "schedule=constant", c, *steps(80)),
            "functional-net-sgd-lr3-w128": (*FUNCTIONAL_NET, "+model.hidden=128", "optim=sgd", "optim.lr=3.0",
                                            "schedule=constant", c, *steps(80)),
        }, suffix="catalogue"),
        *sick("oscillating", ("oscillating", "diverging"), {
            "mlp-sgd-momentum0.99": (*MLP, "optim=sgd", "optim.lr=0.3", "optim.momentum=0.99", "schedule=constant",
                                     c, *steps(300)),
            "user-net-sgd-momentum0.98": (*USER_NET, "optim=sgd", "optim.lr=0.3", "optim.momentum=0.98",
                                          "schedule=constant", c, *steps(300)),
            "functional-net-sgd-momentum0.99": (*FUNCTIONAL_NET, "+model.act=tanh", "optim=sgd", "optim.lr=0.2",
                                                "optim.momentum=0.99", "schedule=constant", c, *steps(300)),
        }, suffix="catalogue"),
        *sick("slow_progress", ("slow_progress", "underfitting"), {
            "resnet-adamw-lr1e-5-constant": (*RESNET, "optim.lr=1e-5", "schedule=constant", *steps(200)),
            "resnet-sgd-lr1e-4-constant": (*RESNET, "optim=sgd", "optim.lr=1e-4", "schedule=constant", *steps(200)),
            "functional-net-adamw-lr1e-5": (*FUNCTIONAL_NET, "optim.lr=1e-5", "schedule=constant", *steps(300)),
        }, suffix="catalogue"),
        *missed_forms(),
        *objective_forms(),
        *healthy_cases(),
    ]


def objective_forms() -> list[Case]:
    """Pathologies only a user's own objective shows: a VAE whose KL weight drowns the latent, a
    contrastive objective without negatives."""
    return [
        *sick("posterior_collapse", ("posterior_collapse",), {
            "vae-beta20": (*VAE, "+loss.beta=20", *steps(300)),
            "vae-beta100-latent2": (*VAE, "+loss.beta=100", "+model.latent=2", *steps(300)),
            "vae-beta10-deep-decoder": (*VAE, "+loss.beta=10", "+model.decoder_depth=3", *steps(300)),
            "vae-beta30-sgd": (*VAE, "+loss.beta=30", "optim=sgd", "optim.lr=1e-2", *steps(300)),
            "vae-beta50-wide-seed3": (*VAE, "+loss.beta=50", "+model.hidden=128", "seed=3", *steps(300)),
            "vae-beta15-lion": (*VAE, "+loss.beta=15", "optim=lion", "optim.lr=3e-4", *steps(300)),
        }, suffix="objective"),
        *sick("representation_collapse", ("representation_collapse",), {
            "views-alignment-adamw": (*ALIGNED, *steps(300)),
            "views-alignment-sgd": (*ALIGNED, "optim=sgd", "optim.lr=0.3", *steps(300)),
            "views-alignment-k4-dim32": (*ALIGNED, "+data.clusters=4", "+model.dim=32", *steps(300)),
            "views-alignment-lion-seed5": (*ALIGNED, "optim=lion", "optim.lr=3e-4", "seed=5", *steps(300)),
            "views-alignment-noise1": (*ALIGNED, "+data.noise=1.0", *steps(300)),
            "views-alignment-lr3e-3": (*ALIGNED, "optim.lr=3e-3", *steps(300)),
        }, suffix="objective"),
        *sick("drowned_part", ("drowned_part",), {
            "tasks-sgd-w1e-4": (*TASKS, "optim=sgd", "optim.lr=0.05", "+loss.rows_weight=1e-4", *steps(400)),
            "tasks-sgd-w1e-3-lr0.1": (*TASKS, "optim=sgd", "optim.lr=0.1", "+loss.rows_weight=1e-3", *steps(400)),
            "tasks-sgd-w1e-5-constant": (*TASKS, "optim=sgd", "optim.lr=0.05", "+loss.rows_weight=1e-5",
                                         "schedule=constant", *steps(400)),
            "tasks-sgd-w3e-4-h128-seed4": (*TASKS, "optim=sgd", "optim.lr=0.05", "+loss.rows_weight=3e-4",
                                           "+model.hidden=128", "seed=4", *steps(400)),
            "tasks-sgd-w1e-4-b64": (*TASKS, "optim=sgd", "optim.lr=0.05", "+loss.rows_weight=1e-4", "batch_size=64",
                                    *steps(300)),
            "tasks-sgd-w1e-3-momentum0.5": (*TASKS, "optim=sgd", "optim.lr=0.05", "optim.momentum=0.5",
                                            "+loss.rows_weight=1e-3", *steps(400)),
        }, suffix="objective"),
    ]


def missed_forms() -> list[Case]:
    """Forms of four classes that an independent suite missed: a warmup over most of the run; an LR
    10x too low where batch norm keeps the loss moving; outliers whose spikes the clip absorbs, in
    inputs or in regression targets; weight decay collapse under Adam's and RMSprop's coupled L2."""
    bright = ("data=custom", "data._target_=bench.suite_models.digits_with_bright_images", "data.num_classes=10")
    bad_targets = ("model=mlp", "data=custom", "data._target_=bench.suite_models.regression_with_bad_targets",
                   "data.task=regression")
    digits_mlp = ("model=mlp", "data=digits")
    forms = "missed-forms"
    return [
        *sick("warmup_too_long", ("warmup_too_long",), {
            "mlp-digits-adam-linear-warmup0.9": (*digits_mlp, *FULL, "optim=adam", "schedule=linear",
                                                 "schedule.warmup=0.9", *steps(400)),
            "mlp-lion-warmup0.8": (*MLP, *FULL, "optim=lion", "optim.lr=1e-4", "schedule.warmup=0.8", *steps(300)),
        }, suffix=forms),
        *sick("slow_progress", ("slow_progress", "underfitting"), {
            "resnet-w16-sgd-lr5e-3-constant": (*RESNET, *FULL, "model.width=16", "optim=sgd", "optim.lr=0.005",
                                               "schedule=constant", *steps(400)),
            "resnet-w16-adamw-lr1e-4-constant": (*RESNET, *FULL, "model.width=16", "optim.lr=1e-4",
                                                 "schedule=constant", *steps(400)),
            "resnet-sgd-lr2e-3-constant-seed7": (*RESNET, *FULL, "optim=sgd", "optim.lr=0.002", "schedule=constant",
                                                 "seed=7", *steps(300)),
            "resnet-w16-adam-lr3e-5-constant-seed3": (*RESNET, *FULL, "model.width=16", "optim=adam",
                                                      "optim.lr=3e-5", "schedule=constant", "seed=3", *steps(300)),
        }, suffix=forms),
        *sick("outlier_samples", ("outlier_samples",), {
            "resnet-digits-1pct-x50-clip1": ("model=resnet", *bright, *FULL, "clip=1.0", *steps(400)),
            "mlp-regression-1pct-targets-x1e3-clip1": (*bad_targets, *FULL, "clip=1.0", *steps(400)),
            "mlp-sgd-2pct-x30-clip1": (*OUTLIERS, *FULL, "+data.scale=30", "optim=sgd", "optim.lr=0.02", "clip=1.0",
                                       *steps(300)),
            "mlp-sgd-regression-2pct-targets-x100-clip0.5": (*bad_targets, *FULL, "+data.scale=100",
                                                             "+data.share=0.02", "optim=sgd", "optim.lr=0.01",
                                                             "clip=0.5", *steps(300)),
        }, suffix=forms),
        *sick("weight_decay_collapse", ("weight_decay_collapse",), {
            "mlp-digits-adam-l2-0.5": (*digits_mlp, *FULL, "optim=adam", "optim.weight_decay=0.5", *steps(400)),
            "mlp-adam-l2-0.3": (*MLP, *FULL, "optim=adam", "optim.weight_decay=0.3", *steps(300)),
            "mlp-digits-rmsprop-l2-0.5": (*digits_mlp, *FULL, "optim=adam", "optim._target_=torch.optim.RMSprop",
                                          "~optim.betas", "~optim.fused", "optim.weight_decay=0.5", *steps(300)),
        }, suffix=forms),
    ]


def healthy_cases() -> list[Case]:
    c = NO_CLIP
    variants = {
        "mlp-adamw-cosine": (*MLP, "optim.lr=3e-3", *steps(300)),
        "mlp-sgd-w128": (*MLP, "model.width=128", "optim=sgd", *steps(300)),
        "mlp-lion-gelu": (*MLP, "model.activation=gelu", "optim=lion", "optim.lr=1e-3", *steps(300)),
        "mlp-adam-linear-d4": (*MLP, "model.depth=4", "optim=adam", "optim.lr=1e-3", "schedule=linear", *steps(300)),
        "mlp-adamw-bf16-wsd": (*MLP, "precision=bf16", "schedule=wsd", *steps(300)),
        "mlp-fp16-scaler": (*MLP, "precision=fp16", *steps(200)),
        "mlp-regression": (*MLP, "data.task=regression", *steps(300)),
        "mlp-layernorm-residual-seed3": (*MLP, "model.norm=layer", "model.residual=true", "seed=3", *steps(300)),
        "mlp-tanh-k20": (*MLP, "model.activation=tanh", "data.num_classes=20", "optim.lr=3e-3", *steps(300)),
        "mlp-accum4-mean": (*MLP, "accum=4", *steps(200)),
        "mlp-adamw-constant-warmup": (*MLP, "schedule=constant", "schedule.warmup=20", *steps(250)),
        "mlp-muon": (*MLP, "optim=muon", *steps(250)),
        "gpt-adamw": (*GPT, *steps(300)),
        "gpt-adamw-lr3e-3-wsd": (*GPT, "optim.lr=3e-3", "schedule=wsd", *steps(300)),
        "gpt-lion": (*GPT, "optim=lion", "optim.lr=3e-4", *steps(300)),
        "gpt-bf16-qknorm": (*GPT, "precision=bf16", "model.qk_norm=true", *steps(250)),
        "gpt-l4-seed11": (*GPT, "model.n_layer=4", "seed=11", *steps(250)),
        "gpt-tied-linear": (*GPT, "model.tie_embeddings=true", "schedule=linear", *steps(250)),
        "gpt-post-ln-warmup": (*GPT, "model.ln_position=post", "optim.lr=1e-3", "schedule.warmup=50", *steps(300)),
        "gpt-accum2-constant": (*GPT, "accum=2", "schedule=constant", "schedule.warmup=20", *steps(200)),
        "rnn-lstm": (*RNN, "optim.lr=3e-3", *steps(300)),
        "rnn-gru-sgd": (*RNN, "model.cell=gru", "optim=sgd", "optim.lr=0.5", *steps(300)),
        "rnn-lstm-bf16-seed5": (*RNN, "precision=bf16", "optim.lr=3e-3", "seed=5", *steps(250)),
        "user-net-adamw": (*USER_NET, *steps(300)),
        "user-net-gelu-d3-sgd": (*USER_NET, "+model.act=gelu", "model.depth=3", "optim=sgd", *steps(300)),
        "user-net-wide-lion": (*USER_NET, "+model.hidden=256", "optim=lion", "optim.lr=3e-4", *steps(250)),
        "user-net-regression": (*USER_NET, "data.task=regression", *steps(300)),
        "user-net-skewed": (*SKEWED, "model._target_=bench.suite_models.Net", *steps(200)),
        "user-net-skewed-sgd-k6": (*SKEWED, "model._target_=bench.suite_models.Net", "+data.classes=6", "optim=sgd",
                                   *steps(200)),
        "user-lm-lstm": (*USER_LM, "optim.lr=3e-3", *steps(300)),
        "user-lm-gru-cosine": (*USER_LM, "+model.cell=gru", "optim.lr=3e-3", *steps(250)),
        "user-lm-lstm-h128-seed2": (*USER_LM, "+model.hidden=128", "optim.lr=2e-3", "seed=2", *steps(250)),
        "resnet-digits": (*RESNET, *steps(150)),
        "resnet-digits-sgd": (*RESNET, "optim=sgd", "optim.lr=0.05", *steps(150)),
        "resnet-digits-groupnorm": (*RESNET, "model.norm=group", *steps(150)),
        "mlp-clip-0.5-sgd-seed8": (*MLP, "optim=sgd", "clip=0.5", "seed=8", *steps(300)),
    }
    later = {  # forms added with the rules for the whole catalogue: split among themselves
        "gpt-full-monitor": (*GPT, *FULL, *steps(300)),
        "gpt-full-monitor-lion-l4": (*GPT, *FULL, "model.n_layer=4", "optim=lion", "optim.lr=3e-4", *steps(250)),
        "functional-net-adamw": (*FUNCTIONAL_NET, *steps(300)),
        "functional-net-tanh-sgd": (*FUNCTIONAL_NET, "+model.act=tanh", "optim=sgd", *steps(300)),
        "mlp-adamw-no-clip-no-guard": (*MLP, c, "guard=off", *steps(300)),
        "user-lm-no-clip-no-guard-seed4": (*USER_LM, "optim.lr=3e-3", c, "guard=off", "seed=4", *steps(250)),
        "resnet-digits-full-monitor": (*RESNET, *FULL, *steps(150)),
    }
    objective = {  # twins of the objective forms: the same models on objectives that work
        "vae-beta0.5": (*VAE, "+loss.beta=0.5", *steps(300)),
        "vae-beta1-deep-decoder": (*VAE, "+loss.beta=1", "+model.decoder_depth=3", *steps(300)),
        "vae-beta1-sgd": (*VAE, "optim=sgd", "optim.lr=1e-2", *steps(300)),
        "vae-beta2-latent2-lion": (*VAE, "+loss.beta=2", "+model.latent=2", "optim=lion", "optim.lr=3e-4",
                                   *steps(300)),
        "views-nt-xent": (*VIEWS, "loss._target_=bench.suite_models.nt_xent", *steps(300)),
        "views-nt-xent-t0.5-sgd": (*VIEWS, "loss._target_=bench.suite_models.nt_xent", "+loss.temperature=0.5",
                                   "optim=sgd", "optim.lr=0.3", *steps(300)),
        "views-nt-xent-k4-dim32": (*VIEWS, "loss._target_=bench.suite_models.nt_xent", "+data.clusters=4",
                                   "+model.dim=32", *steps(300)),
        "views-nt-xent-noise1-seed5": (*VIEWS, "loss._target_=bench.suite_models.nt_xent", "+data.noise=1.0", "seed=5",
                                       *steps(300)),
        "tasks-sgd-w1": (*TASKS, "optim=sgd", "optim.lr=0.05", *steps(400)),
        "tasks-adamw-w1": (*TASKS, *steps(400)),
        "tasks-adamw-w1e-3": (*TASKS, "+loss.rows_weight=1e-3", *steps(400)),
        "tasks-sgd-w3-h128": (*TASKS, "optim=sgd", "optim.lr=0.05", "+loss.rows_weight=3", "+model.hidden=128",
                              *steps(400)),
    }
    working_lr = {  # beside the missed forms: batch norm CNNs at their working LR, constant
        "resnet-w16-sgd-lr0.05-constant": (*RESNET, *FULL, "model.width=16", "optim=sgd", "optim.lr=0.05",
                                           "schedule=constant", *steps(300)),
        "resnet-adamw-lr1e-3-constant-seed2": (*RESNET, *FULL, "schedule=constant", "seed=2", *steps(300)),
    }
    return [*(Case(f"{HEALTHY}/{v}", HEALTHY, (*COMMON, *o)) for v, o in variants.items()),
            *(Case(f"{HEALTHY}/{v}", HEALTHY, (*COMMON, *o), batch="catalogue") for v, o in later.items()),
            *(Case(f"{HEALTHY}/{v}", HEALTHY, (*COMMON, *o), batch="missed-forms") for v, o in working_lr.items()),
            *(Case(f"{HEALTHY}/{v}", HEALTHY, (*COMMON, *o), batch="objective") for v, o in objective.items())]


def part_of(case: Case, cases: list[Case]) -> str:
    """dev for every DEV_EVERY-th case of its class in hash order, else heldout: stable as cases are added."""
    same = sorted((c.name for c in cases if (c.cause, c.batch) == (case.cause, case.batch)), key=_hash)
    return "dev" if same.index(case.name) % DEV_EVERY == 0 else "heldout"


def _hash(name: str) -> str:
    return hashlib.sha1(name.encode()).hexdigest()


def redrawn(case: Case, draw: int) -> Case:
    """The case with a new run seed, a new synthetic task (data.seed) and 1-1.5x its length (evals and
    checkpoints stretched alike), one set per `draw`: runs the rules have never seen, same expected cause."""
    digest = int(_hash(case.name + ("/redrawn" if draw == 1 else f"/redrawn{draw}"))[:8], 16)
    stretch = (1.0, 1.25, 1.5)[digest % 3]
    overrides = [_stretched(o, stretch) for o in case.overrides]
    overrides.append(f"seed={100 + digest % 900}")
    if "data=synthetic" in overrides:
        overrides.append(f"data.seed={1 + digest % 97}")
    return replace(case, overrides=tuple(overrides))


def _stretched(override: str, factor: float) -> str:
    key, _, value = override.partition("=")
    if key in ("trainer.max_steps", "trainer.eval_every", "trainer.ckpt_every"):
        return f"{key}={max(1, round(int(value) * factor))}"
    return override


# --- running ---------------------------------------------------------------------------------

def run_case(case: Case, out: Path) -> dict:
    """Train one case in this process and diagnose it; an exception is a result too (a miss)."""
    import torch
    from hydra import compose, initialize_config_dir

    from harness.entry.resolvers import register_resolvers
    from harness.modes.run import run

    register_resolvers()
    torch.set_num_threads(1)
    run_dir = out / case.name
    started = time.monotonic()
    try:
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose(config_name="train", overrides=[*case.overrides, "overwrite=true"])
        run(cfg, run_dir=run_dir)
        error = None
    except (Exception, SystemExit) as exc:  # a case that cannot train is reported, not fatal to the suite
        error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        traceback.print_exc()
    return {**score(case, run_dir, error), "seconds": round(time.monotonic() - started, 1)}


def score(case: Case, run_dir: Path, error: str | None = None) -> dict:
    """Diagnose the run in `run_dir` and judge it against the case's expectation; a sick case whose
    cause its own outcome contradicts is marked invalid, with the outcome that shows it."""
    from harness.diagnosis import Severity, diagnose, load_run
    from harness.diagnosis.outcome import outcome

    result = {"name": case.name, "cause": case.cause, "error": error, "findings": [], "live": [], "valid": True}
    if error is None:
        run = load_run(run_dir)
        findings = diagnose(run)
        result["findings"] = [f"{f.name}:{f.severity.value}" for f in findings]
        result["live"] = [e.get("finding") for e in run.events_of("diagnosis")]
        result["status"] = run.summary.get("status")
        ended = outcome(run)
        result["outcome"] = ended.line() if ended is not None else None
        result["valid"] = not (case.cause in OUTCOME_CAUSES and ended is not None and not ended.bad)
    else:
        findings = []
    if case.sick:
        naming = [f for f in findings if f.name in case.expect or (case.mention and case.mention in f.fix)]
        first = findings[0] if findings else None
        result["ok"] = any(f is first or f.severity is Severity.CRITICAL for f in naming)
    else:
        result["ok"] = error is None and all(f.severity is Severity.INFO for f in findings)
    return result


def run_in_child(case: Case, which: list[str], out: Path, timeout: float = CASE_TIMEOUT) -> dict:
    """Train one case in its own process (`which`: the --part/--draw arguments that define the
    case's overrides): a crash or a hang costs that case, not the suite."""
    result_file = out / case.name / RESULT_FILE
    result_file.unlink(missing_ok=True)
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "bench.pathology_suite", *which, "--case", case.name, "--out",
                               str(out.resolve())], capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env={**os.environ, "OMP_NUM_THREADS": "1"})
        last_line = (proc.stderr.strip().splitlines() or [""])[-1]
        failure = None if result_file.is_file() else f"exit {proc.returncode}: {last_line}"
    except subprocess.TimeoutExpired:
        failure = f"timed out after {timeout:g} s"
    if failure is not None:
        return {**score(case, out / case.name, failure), "seconds": round(time.monotonic() - started, 1)}
    return json.loads(result_file.read_text())


def tally(results: list[dict]) -> dict:
    sick = [r for r in results if r["cause"] != HEALTHY]
    valid = [r for r in sick if r.get("valid", True)]
    healthy = [r for r in results if r["cause"] == HEALTHY]
    live_alarms = sum(1 for r in healthy if r["live"])
    return {"sick": len(sick), "named": sum(r["ok"] for r in sick), "valid": len(valid),
            "valid_named": sum(r["ok"] for r in valid), "healthy": len(healthy),
            "clean": sum(r["ok"] for r in healthy), "healthy_live_alarms": live_alarms}


def report(results: list[dict], part: str) -> str:
    t = tally(results)
    by_cause: dict[str, list[dict]] = defaultdict(list)
    for r in results:
        by_cause[r["cause"]].append(r)
    lines = [f"# pathology suite, {part} part", "",
             f"sick runs named: {t['named']}/{t['sick']} ({_pct(t['named'], t['sick'])}); "
             f"healthy runs clean: {t['clean']}/{t['healthy']} ({_pct(t['clean'], t['healthy'])}); "
             f"healthy runs with a live alarm: {t['healthy_live_alarms']}",
             f"valid sick runs named: {t['valid_named']}/{t['valid']} ({_pct(t['valid_named'], t['valid'])})", "",
             "| cause | runs | right |", "|---|---|---|"]
    lines += [f"| {cause} | {len(rs)} | {sum(r['ok'] for r in rs)} |" for cause, rs in sorted(by_cause.items())]
    invalid = [r for r in results if not r.get("valid", True)]
    if invalid:
        lines += ["", "invalid (the run's own outcome contradicts its cause):"]
        lines += [f"- {r['name']}: {r['outcome']}; {', '.join(r['findings']) or 'no finding'}" for r in invalid]
    misses = [r for r in results if not r["ok"] and r.get("valid", True)]
    if misses:
        lines += ["", "misses:"]
        lines += [f"- {r['name']}: {r['error'] or ', '.join(r['findings']) or 'no finding'}" for r in misses]
    return "\n".join(lines)


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "n/a"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["dev", "heldout", "redrawn", "all"], default="redrawn",
                        help="redrawn: every case with a new seed, task and length (the current held-out part)")
    parser.add_argument("--draw", type=int, default=CURRENT_DRAW,
                        help=f"which redrawing (default {CURRENT_DRAW}, the one docs/pathology_suite.md's figures come from; "
                             "score a changed rule on a draw never looked at)")
    parser.add_argument("--only", default="", help="cases whose name contains this text")
    parser.add_argument("--workers", type=int, default=2, help="runs trained at once (one thread each)")
    parser.add_argument("--out", type=Path, default=None, help="default: outputs/pathology_suite/PART")
    parser.add_argument("--rescore", type=Path, default=None, metavar="DIR",
                        help="re-diagnose the runs an earlier invocation left in DIR; trains nothing")
    parser.add_argument("--list", action="store_true", help="print the cases with their part and exit")
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)  # one case, in this process (the workers)
    args = parser.parse_args(argv)
    cases = catalogue()
    part = f"redrawn{args.draw}" if args.part == "redrawn" else args.part
    out = args.rescore or args.out or ROOT / "outputs" / "pathology_suite" / part
    if args.part == "redrawn":
        cases = [redrawn(c, args.draw) for c in cases]
    if args.case:
        case = next(c for c in cases if c.name == args.case)
        result = run_case(case, out)
        (out / case.name).mkdir(parents=True, exist_ok=True)  # a case the harness refused has no run dir
        (out / case.name / RESULT_FILE).write_text(json.dumps(result))
        return 0
    chosen = [c for c in cases if (args.part in ("all", "redrawn") or part_of(c, cases) == args.part)
              and args.only in c.name]
    if args.list:
        for c in chosen:
            naming = "/".join(c.expect) or f"a fix naming {c.mention}"
            print(f"{args.part if args.part == 'redrawn' else part_of(c, cases):8s} {c.name}: expect {naming}")
        return 0
    if args.rescore:
        results = [score(c, out / c.name) for c in chosen if (out / c.name / "metrics.jsonl").is_file()]
        if not results:
            fail(ConfigError("--rescore", str(out), f"a directory holding runs of the {part} part (none found)"))
    else:
        out.mkdir(parents=True, exist_ok=True)
        results = []
        with ThreadPoolExecutor(args.workers) as pool:
            which = ["--part", args.part, "--draw", str(args.draw)]
            for future in as_completed([pool.submit(run_in_child, c, which, out) for c in chosen]):
                results.append(r := future.result())
                print(f"[{len(results)}/{len(chosen)}] {'ok  ' if r['ok'] else 'MISS'} {r['name']} "
                      f"({r['seconds']} s): {r['error'] or ', '.join(r['findings']) or 'no finding'}", flush=True)
    results.sort(key=lambda r: r["name"])
    (out / "results.json").write_text(json.dumps({"part": part, "tally": tally(results), "runs": results},
                                                 indent=1))
    text = report(results, part)
    (out / "results.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
