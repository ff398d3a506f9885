"""Bad input: one line naming the key, the value and what is allowed; exit 2; no traceback; nothing lost."""
from __future__ import annotations

import pytest

from conftest import TINY_GPT, compose_cfg, one_line_error, run_cli, train
from harness.config.run_config import validate_config
from harness.core.errors import ConfigError

BAD_VALUES = [
    (["optim.lr=0"], "optim.lr", "0"),
    (["optim.lr=-1e-3"], "optim.lr", "-0.001"),
    (["clip=-1"], "clip", "-1"),
    (["accum=0"], "accum", "0"),
    (["trainer.max_steps=100", "schedule.warmup=100"], "schedule.warmup", "100"),
    (["data=text", "data.path=/nonexistent/corpus.txt"], "data.path", "/nonexistent/corpus.txt"),
    (["precision=fp16", "device=cuda"], "device", "cuda"),
    (["resume=/nonexistent/run"], "resume", "/nonexistent/run"),
    (["batch_size=10", "accum=4"], "batch_size", "10"),
    (["clip_mode=sideways"], "clip_mode", "sideways"),
    (["model.n_head=3"], "model.n_embd", "128"),
    (["model=mlp"], "model", "harness.models.mlp.MLP"),
    (["data=tokens", "data.dir=/nonexistent"], "data.dir", "/nonexistent"),
    (["objective=accuracy"], "objective", "accuracy"),
    (["accum_reduction=avg"], "accum_reduction", "avg"),
    (["mode=train2"], "mode", "train2"),
    (["guard.spike_zscore=-1"], "guard.spike_zscore", "-1"),
    (["guard.rollback_lr_factor=2"], "guard.rollback_lr_factor", "2"),
    (["guard.spike_min_history=500"], "guard.spike_min_history", "500"),
    (["fault=nan_grad", "fault.at=[0]"], "fault.at", "[0]"),
    (["early_stop=default", "early_stop.patience=0"], "early_stop.patience", "0"),
    (["monitor.every=0"], "monitor.every", "0"),
    (["monitor.level=verbose"], "monitor.level", "verbose"),
    (["scale_lr.rule=cubic"], "scale_lr.rule", "cubic"),
    (["data.worker_start=thread"], "data.worker_start", "thread"),
]


@pytest.mark.parametrize("overrides,key,value", BAD_VALUES, ids=[b[1] + ":" + b[2] for b in BAD_VALUES])
def test_validation_names_key_value_and_allowed(overrides, key, value):
    with pytest.raises(ConfigError) as err:
        validate_config(compose_cfg(overrides))
    message = str(err.value)
    assert err.value.key == key and message.startswith(f"{key}=")
    assert value in message and "invalid:" in message and "\n" not in message


def test_cli_unknown_group_option(tmp_path):
    result = run_cli(["optim=adamm", f"hydra.run.dir={tmp_path / 'run'}"])
    one_line_error(result, "optim")
    assert "adamw" in result.stderr  # lists what is allowed
    assert not (tmp_path / "run").exists()


def test_cli_bad_value_leaves_no_run_dir_and_keeps_an_existing_run(tmp_path):
    fresh = tmp_path / "fresh"
    one_line_error(run_cli(["optim.lr=-1", f"hydra.run.dir={fresh}"]), "optim.lr")
    assert not fresh.exists()

    existing = tmp_path / "existing"
    train([*TINY_GPT, "debug=smoke"], existing)
    before = {p: p.read_bytes() for p in existing.rglob("*") if p.is_file() and ".hydra" not in p.parts}
    one_line_error(run_cli([*TINY_GPT, "debug=smoke", "resume=auto", "clip=-1", f"hydra.run.dir={existing}"]), "clip")
    after = {p: p.read_bytes() for p in existing.rglob("*") if p.is_file() and ".hydra" not in p.parts}
    assert before.keys() <= after.keys()
    assert all(before[p] == after[p] for p in before)


def test_cli_mission_command_runs(tmp_path):
    """The exact command from the README, shrunk with debug=smoke so the suite stays fast."""
    result = run_cli(["optim=adamw", "clip=1.0", "debug=smoke", f"hydra.run.dir={tmp_path}"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "summary.json").exists() and (tmp_path / "tb").is_dir()
    assert (tmp_path / "report.md").exists()  # the diagnosis runs at the end of every run


def test_cli_unknown_plugin_group_option(tmp_path):
    result = run_cli(["-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=bayes", f"hydra.sweep.dir={tmp_path}"])
    one_line_error(result, "hydra/sweeper/sampler")
    assert "tpe" in result.stderr
