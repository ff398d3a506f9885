"""Every option of every config group trains end to end with debug=smoke."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import CONF, TINY_GPT, compose_cfg, train

VECTOR = ["model=mlp", "data=synthetic", "model.width=32"]
SKIP_GROUPS = {"hydra", "hparams_search", "debug"}
OWN_MODEL_SIZES = {("model", "hf_causal_lm"), ("model", "resnet"), ("model", "rnn")}  # no TINY_GPT keys


def options(group: str) -> list[str]:
    return sorted(p.relative_to(CONF / group).with_suffix("").as_posix() for p in (CONF / group).rglob("*.yaml"))


def extra_for(group: str, option: str, tmp_path) -> list[str]:
    if group == "data" and option == "text":
        path = tmp_path / "corpus.txt"
        path.write_text("the quick brown fox jumps over the lazy dog\n" * 200)
        return [f"data.path={path}"]
    if group == "data" and option == "tokens":
        rng = np.random.default_rng(0)
        rng.integers(0, 50, 20_000, dtype=np.uint16).tofile(tmp_path / "train.bin")
        rng.integers(0, 50, 4_000, dtype=np.uint16).tofile(tmp_path / "val.bin")
        (tmp_path / "meta.json").write_text(json.dumps({"vocab_size": 50}))
        return [f"data.dir={tmp_path}"]
    if group == "data" and option == "custom":
        return ["data._target_=user_code.pairs", "model=mlp", "model.width=32"]
    if group == "data" and option == "hf":
        datasets = pytest.importorskip("datasets", reason='data=hf needs the optional hf extra')
        lines = Path(json.__file__).read_text().splitlines()
        datasets.Dataset.from_dict({"text": lines}).save_to_disk(str(tmp_path / "texts"))
        return [f"data.path={tmp_path / 'texts'}"]
    if group == "model" and option == "hf_causal_lm":
        pytest.importorskip("transformers", reason="model=hf_causal_lm needs the optional hf extra")
        return ["model.block_size=32"]
    if (group, option) in {("data", "synthetic"), ("model", "mlp")}:
        return VECTOR
    if (group, option) == ("data", "digits"):
        pytest.importorskip("sklearn", reason='data=digits needs the optional vision extra')
        return ["model=mlp", "model.width=32"]
    if (group, option) == ("model", "resnet"):
        pytest.importorskip("sklearn", reason='model=resnet trains on data=digits: the optional vision extra')
        return ["data=digits", "model.width=8", "model.stages=2", "model.blocks_per_stage=1"]
    if (group, option) == ("model", "rnn"):
        return ["model.hidden=32", "model.n_embd=16", "model.block_size=32"]
    if (group, option) == ("init", "checkpoint"):  # the weights of a run of the same model
        train([*TINY_GPT, "debug=smoke"], tmp_path / "source")
        return [f"init.path={tmp_path / 'source'}"]
    if (group, option) == ("experiment", "digits_resnet"):
        pytest.importorskip("sklearn", reason='experiment=digits_resnet needs the optional vision extra')
    return []


# The pathology presets are meant to misbehave; tests/unit/diagnosis/test_pathologies.py runs each of them.
CASES = [(g, o) for g in sorted(p.name for p in CONF.iterdir() if p.is_dir() and p.name not in SKIP_GROUPS)
         for o in options(g) if not o.startswith("pathology/")]


@pytest.mark.parametrize("group,option", CASES, ids=[f"{g}={o}" for g, o in CASES])
def test_option_runs_with_smoke(group, option, tmp_path):
    if (group, option) == ("optim", "adamw8bit"):
        pytest.importorskip("bitsandbytes", reason="optim=adamw8bit needs the optional bitsandbytes extra")
    overrides = [f"{group}={option}", "debug=smoke", *extra_for(group, option, tmp_path)]
    if "model=mlp" not in overrides and group != "experiment" and (group, option) not in OWN_MODEL_SIZES:
        overrides += TINY_GPT
    objective, summary = train(overrides, tmp_path / "run")
    assert summary["status"] == "completed"
    assert summary["steps"] == 6
    assert math.isfinite(objective) and objective == summary["best_val_loss"]
    best = "best.dcp" if (group, option) == ("parallel", "fsdp") else "best.pt"  # a sharded run's is a directory
    assert (tmp_path / "run" / "checkpoints" / best).exists()


@pytest.mark.slow
def test_compile_matches_eager(tmp_path):
    """compile=true (torch.compile, ~20 s of compilation on CPU) trains like eager mode."""
    overrides = [*VECTOR, "debug=smoke"]
    eager, _ = train(overrides, tmp_path / "eager")
    compiled, summary = train([*overrides, "compile=true"], tmp_path / "compiled")
    assert summary["status"] == "completed"
    assert compiled == pytest.approx(eager, rel=1e-3)


def test_experiment_stable_turns_every_safeguard_on():
    cfg = compose_cfg(["experiment=stable"])
    assert cfg.model.qk_norm and cfg.loss.z_loss == 1e-4 and cfg.clip == 1.0 and cfg.schedule.warmup == 0.05
    assert cfg.guard.skip_nonfinite and cfg.guard.spike_zscore


def test_lr_sensitivity_range_is_the_contiguous_run_around_the_best():
    from bench.lr_sensitivity import good_range

    losses = {1e-4: 3.9, 1e-3: 2.45, 1e-2: 2.4, 1e-1: 2.9, 3e-1: 2.5}  # 0.3 is good again, but not contiguous
    best, decades, largest = good_range(losses)
    assert best == 2.4 and decades == pytest.approx(1.0) and largest == 1e-2
