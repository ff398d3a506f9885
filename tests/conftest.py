"""Tests compose the real conf/ the way a user's command line does, then shrink it."""
from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.defaults_list import Overrides
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig

import warm_train
from harness.entry.resolvers import register_resolvers

register_resolvers()
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    # A shell ignores SIGINT in what it starts in the background, and children inherit that: the
    # commands the Ctrl-C tests stop must hear it as they do when a person runs the suite.
    signal.signal(signal.SIGINT, signal.default_int_handler)
if os.environ.get("PYTEST_XDIST_WORKER"):  # test workers share the cores: their CLI children take one thread each
    os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"

# A GPT small enough that a smoke run takes about a second on two cores.
TINY_GPT = ["model.n_layer=2", "model.n_embd=32", "model.n_head=2", "model.block_size=32"]


_COMPOSED: dict[tuple[str, ...], DictConfig] = {}  # conf/ composed with a set of group choices, per process


def compose_cfg(overrides: list[str]) -> DictConfig:
    """conf/ composed as Hydra composes it. Hydra applies `key=value` overrides after it has merged
    the option files the group choices (`model=mlp`, `+group=option`, `~group`) name; that merge
    costs ~0.1 s a call and hundreds of tests repeat a few sets of choices, so it is kept per set
    and Hydra's own override step is applied to a copy (test_compose_cache.py checks this against
    `compose`)."""
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        parsed = OverridesParser.create().parse_overrides(overrides)
        values = [o for o in Overrides(GlobalHydra.instance().config_loader().repository, parsed).config_overrides
                  if not o.is_hydra_override()]
        choices = tuple(o.input_line for o in parsed if o not in values)
        if choices not in _COMPOSED:
            _COMPOSED[choices] = compose(config_name="train", overrides=list(choices))
        cfg = copy.deepcopy(_COMPOSED[choices])
        ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
        return cfg


def train(overrides: list[str], run_dir: Path):
    """Run training in-process on the composed config; returns (objective, summary)."""
    from harness.modes.run import run

    torch.set_num_threads(1)  # tests compare bits; also keeps parallel test workers off each other
    if not any(o.startswith("diagnose") for o in overrides):
        overrides = ["diagnose=false", *overrides]  # the report has tests of its own; plots cost seconds
    objective = run(compose_cfg(overrides), run_dir=run_dir)
    return objective, json.loads((run_dir / "summary.json").read_text())


def wait_for_plots(run_dir: Path, timeout: float = 90.0) -> str:
    """A run's plots come from a background process after it ends: wait for them; returns report.md."""
    from harness.diagnosis.report import PLOTS_PENDING

    deadline = time.monotonic() + timeout
    while PLOTS_PENDING in (report := (run_dir / "report.md").read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return report


# How long a test waits for an event (a step logged, a file written, a job ended) before it fails:
# generous, since a slow or busy machine is one users have; reaching it fails the test, it never
# lets the test go on as if the event had happened.
EVENT_TIMEOUT_S = 300.0


def wait_until(condition, what: str, timeout: float = EVENT_TIMEOUT_S) -> None:
    """Poll `condition` until it holds; fail naming `what` if it does not within `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def run_cli(args: list[str], cwd: Path = ROOT, timeout: float = 300, env: dict | None = None, cold: bool = False):
    """`python train.py ARGS` as a user types it: a process of its own, forked from one that has
    imported torch and Hydra already (warm_train.py); `cold`: a fresh interpreter, start-up and all."""
    return warm_train.run([sys.executable, str(ROOT / "train.py"), *args], cwd=cwd, timeout=timeout,
                          env={**os.environ, **(env or {})}, cold=cold)


def one_line_error(result: subprocess.CompletedProcess, key: str) -> str:
    """The CLI refused: exit 2, no traceback, one line `error: KEY=...` on stderr, which is returned."""
    assert result.returncode == 2, result.stderr[-2000:]
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {key}="), result.stderr
    return lines[0]


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """One shared stdlib corpus cache for the whole session, never the user's home."""
    cache = tmp_path_factory.getbasetemp() / "cache"
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))


# Ranks on CPU (gloo), one thread each: what the multi-process tests check. On a machine with fewer
# GPUs than ranks, device=auto would give each rank a GPU it does not have.
CPU_RANKS = {"OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}


def torchrun(args: list[str], cwd: Path, timeout: float = 180, script: Path = ROOT / "train.py",
             nproc: int = 2) -> subprocess.CompletedProcess:
    """`torchrun --standalone` of train.py (or `script`) on CPU; fails the test unless it exits 0."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(script),
           *args]
    env = {**os.environ, **CPU_RANKS}
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # SIGTERM lets torchrun stop its ranks (and their DataLoader workers) before it exits; a
        # SIGKILL would leave them running beside the rest of the suite, holding the pipes open.
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = "", ""
        pytest.fail(f"torchrun did not finish in {timeout:.0f} s:\n{out[-2000:]}{err[-2000:]}")
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def logged_train_losses(run_dir: Path) -> list[float]:
    """Each logged train loss, its first-update loss and its parts, in order."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    return [v for r in rows if "train/loss" in r for k, v in sorted(r.items())
            if k.startswith("train/loss") and k != "train/loss_max"]  # a window's peak is each rank's own


def run_dirs(cwd: Path) -> list[Path]:
    """The run dirs under `cwd/outputs`, named as any run's: outputs/<date>/<time>."""
    return sorted(p for p in (cwd / "outputs").glob("*/*") if p.is_dir())
