"""Resume is exact: 2N steps == N steps, stop, resume=auto, N steps (CPU fp32, bit for bit)."""
from __future__ import annotations

import pytest
import torch

from conftest import TINY_GPT, run_cli, train
from harness.state.checkpoint import load_checkpoint, step_checkpoints
from harness.core.errors import ConfigError
from harness.logger.tracking import read_metrics

MODELS = {
    "gpt": [*TINY_GPT, "model.dropout=0.1"],  # dropout: the RNG state must be restored too
    "mlp": ["model=mlp", "data=synthetic", "model.width=32", "model.dropout=0.1"],
}
COMMON = ["trainer.max_steps=12", "trainer.log_every=1", "trainer.eval_every=4", "trainer.ckpt_every=4",
          "schedule.warmup=3", "accum=2", "batch_size=8", "logger=tensorboard"]


def final_state(run_dir):
    return load_checkpoint(step_checkpoints(run_dir)[0])


def losses(run_dir):
    return [(r["step"], r["kind"], r.get("train/loss", r.get("val/loss"))) for r in read_metrics(run_dir)]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_stop_and_resume_is_bit_exact(model, tmp_path):
    overrides = MODELS[model] + COMMON
    straight, pieces = tmp_path / "straight", tmp_path / "pieces"
    train(overrides, straight)
    _, first = train([*overrides, "trainer.stop_after=6"], pieces)
    assert first["status"] == "stopped" and first["steps"] == 6
    _, second = train([*overrides, "resume=auto"], pieces)
    assert second["status"] == "completed" and second["steps"] == 12

    a, b = final_state(straight), final_state(pieces)
    assert a["step"] == b["step"] == 12
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    for sa, sb in zip(a["optimizer"]["state"].values(), b["optimizer"]["state"].values()):
        for k in sa:
            assert torch.equal(torch.as_tensor(sa[k]), torch.as_tensor(sb[k]))
    assert losses(straight) == losses(pieces)
    assert len([r for r in losses(pieces) if r[1] == "train"]) == 12


def test_resume_auto_without_checkpoint_starts_fresh(tmp_path):
    _, summary = train([*MODELS["mlp"], *COMMON, "resume=auto"], tmp_path / "run")
    assert summary["status"] == "completed" and summary["steps"] == 12


def test_resume_from_explicit_path_continues_in_new_dir(tmp_path):
    overrides = MODELS["mlp"] + COMMON
    train([*overrides, "trainer.stop_after=8"], tmp_path / "a")
    _, summary = train([*overrides, f"resume={tmp_path / 'a'}"], tmp_path / "b")
    assert summary["steps"] == 12
    assert [p.name for p in step_checkpoints(tmp_path / "b")][0] == "step_00000012.pt"


def test_corrupt_latest_checkpoint_falls_back_to_previous(tmp_path):
    overrides = MODELS["mlp"] + COMMON
    run = tmp_path / "run"
    train([*overrides, "trainer.stop_after=8"], run)
    newest = step_checkpoints(run)[0]
    assert newest.name == "step_00000008.pt"
    newest.write_bytes(newest.read_bytes()[:100])  # a crash mid-copy by some other tool
    _, summary = train([*overrides, "resume=auto"], run)
    assert summary["status"] == "completed" and summary["steps"] == 12


def test_a_resume_with_another_lr_or_weight_decay_trains_with_the_configs_values(tmp_path):
    """The seeds' "restart from the last good checkpoint with a lower LR": the checkpoint's optimizer
    state must not silently bring its old LR back."""
    overrides = [*MODELS["mlp"], *COMMON, "schedule=constant", "schedule.warmup=0", "optim.lr=0.01"]
    run = tmp_path / "run"
    train([*overrides, "trainer.stop_after=6"], run)
    train([*overrides, "optim.lr=0.001", "optim.weight_decay=0.05", "resume=auto"], run)
    logged = {r["step"]: r["train/lr"] for r in read_metrics(run) if r["kind"] == "train"}
    assert logged[6] == pytest.approx(0.01) and logged[7] == pytest.approx(0.001) and logged[12] == pytest.approx(0.001)
    groups = final_state(run)["optimizer"]["param_groups"]
    assert {g["weight_decay"] for g in groups} <= {0.0, 0.05} and 0.05 in {g["weight_decay"] for g in groups}


@pytest.mark.parametrize("before,after", [("false", "true"), ("true", "false")])
def test_a_resume_that_turns_loss_scaling_on_or_off_starts_the_scaler_fresh(tmp_path, before, after):
    """The fp16_underflow remedy continues a checkpoint with loss scaling on: a disabled scaler
    saved nothing for the enabled one to load (and the other way round there is nothing to take)."""
    overrides = [*MODELS["mlp"], *COMMON, "precision=fp16", "logger=none"]
    run = tmp_path / "run"
    train([*overrides, f"precision.loss_scaling={before}", "trainer.stop_after=6"], run)
    _, summary = train([*overrides, f"precision.loss_scaling={after}", "resume=auto"], run)
    assert summary["status"] == "completed" and summary["steps"] == 12
    scaler = final_state(run)["scaler"]
    assert bool(scaler) is (after == "true")  # the scaler the run finished with


def test_a_resume_in_a_run_dir_reuses_its_saved_overrides(tmp_path):
    """`resume=auto` with nothing else typed continues the run as it was started (the command's own
    overrides still win); a directory with no run says so at WARNING level."""
    run_dir = tmp_path / "run"
    started = [*MODELS["mlp"], *COMMON, "logger=none", "model.width=48", "optim.lr=0.003"]
    first = run_cli([*started, "trainer.stop_after=8", f"hydra.run.dir={run_dir}"])
    assert first.returncode == 0, first.stderr[-2000:]
    resumed = run_cli(["resume=auto", f"hydra.run.dir={run_dir}"])
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "with the run's own overrides" in resumed.stdout and "trainer.stop_after" not in resumed.stdout
    straight = tmp_path / "straight"
    train(started, straight)  # in-process: the same losses as the CLI run resumed
    assert losses(straight) == losses(run_dir)
    mistyped = run_cli([*started, "resume=auto", f"hydra.run.dir={tmp_path / 'nope'}", "trainer.max_steps=4"])
    assert mistyped.returncode == 0, mistyped.stderr[-2000:]
    (line,) = [line for line in (mistyped.stdout + mistyped.stderr).splitlines() if "holds no run" in line]
    assert "[WARNING]" in line and str(tmp_path / "nope") in line


@pytest.mark.trajectory
def test_a_finished_cosine_run_is_trained_further_from_its_weights_as_the_refusal_says(tmp_path):
    """The hint's way out: a resume that would jump a cosine run's LR is refused naming
    init=checkpoint, and that command starts a new run from the run's best weights."""
    base = ["model=mlp", "data=synthetic", "model.width=32", "optim.lr=1e-2", "trainer.max_steps=40",
            "trainer.eval_every=20", "logger=none", "diagnose=false"]
    train(base, tmp_path / "first")
    with pytest.raises(ConfigError, match="init=checkpoint init.path=RUN_DIR hydra.run.dir=NEW_DIR"):
        train([*base, "resume=auto", "trainer.max_steps=60"], tmp_path / "first")
    _, summary = train([*base, "init=checkpoint", f"init.path={tmp_path / 'first'}", "trainer.max_steps=60"],
                       tmp_path / "further")
    first_losses = [r["train/loss"] for r in read_metrics(tmp_path / "first") if r["kind"] == "train"]
    further = [r["train/loss"] for r in read_metrics(tmp_path / "further") if r["kind"] == "train"]
    assert further[0] < first_losses[0] - 0.3  # it starts where the first run's weights were, not from scratch
    assert summary["steps"] == 60 and summary["status"] == "completed"
    with pytest.raises(ConfigError, match="init.path=.* is invalid: a checkpoint of this model"):
        train([*base, "model.width=16", "init=checkpoint", f"init.path={tmp_path / 'first'}"], tmp_path / "other")
    assert not (tmp_path / "other").exists()
