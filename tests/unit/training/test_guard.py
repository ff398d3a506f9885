"""The guard skips bad updates, rolls back when they repeat, and early stopping counts across resumes."""
from __future__ import annotations

import math
import statistics

import pytest
import torch

from conftest import compose_cfg, train
from harness.state.checkpoint import load_checkpoint, step_checkpoints
from harness.assembly.assemble import assemble
from harness.config.run_config import validate_config
from harness.core.distributed import DistInfo
from harness.training.guard import Guard, GuardConfig, Verdict
from harness.logger.tracking import read_metrics

pytestmark = pytest.mark.trajectory  # follows unstable runs: checked under other kernels too (docs/testing.md)

MLP = ["model=mlp", "data=synthetic", "model.width=32", "logger=none", "trainer.log_every=5",
       "trainer.eval_every=20", "trainer.ckpt_every=10", "schedule.warmup=5", "optim.lr=3e-3"]


def test_nan_gradients_are_skipped_and_the_run_matches_a_clean_one(tmp_path):
    _, clean = train([*MLP, "trainer.max_steps=60"], tmp_path / "clean")
    _, faulty = train([*MLP, "trainer.max_steps=60", "fault=nan_grad", "fault.at=[5,9,13]"], tmp_path / "faulty")
    assert faulty["status"] == "completed" and faulty["skipped_steps"] == 3
    assert [e["step"] for e in faulty["events"] if e["kind"] == "skip_nonfinite"] == [5, 9, 13]
    state = load_checkpoint(step_checkpoints(tmp_path / "faulty")[0])
    for per_param in state["optimizer"]["state"].values():
        for value in per_param.values():
            assert torch.isfinite(torch.as_tensor(value)).all()
    assert all(torch.isfinite(p).all() for p in state["model"].values())
    assert abs(faulty["final_val_loss"] - clean["final_val_loss"]) <= 0.05 * clean["final_val_loss"]


def test_repeated_faults_roll_back_with_lower_lr_and_finish(tmp_path):
    run = tmp_path / "run"
    overrides = [*MLP, "trainer.max_steps=60", "fault=inf_loss", "fault.at=[22,23,24,25]", "logger=tensorboard"]
    _, summary = train(overrides, run)
    assert summary["status"] == "completed" and summary["steps"] == 60
    rollbacks = [e for e in summary["events"] if e["kind"] == "rollback"]
    assert len(rollbacks) == 1 and "rolled back to step 20" in rollbacks[0]["message"]
    lrs = {r["step"]: r["train/lr"] for r in read_metrics(run) if r["kind"] == "train"}
    _, reference = train([*MLP, "trainer.max_steps=60"], tmp_path / "reference")
    ref_lrs = {r["step"]: r["train/lr"] for r in read_metrics(tmp_path / "reference") if r["kind"] == "train"}
    assert lrs[60] == pytest.approx(0.5 * ref_lrs[60])  # LR x0.5 from the rollback on
    assert lrs[15] == pytest.approx(ref_lrs[15])
    final = load_checkpoint(step_checkpoints(run)[0])
    assert final["trainer"]["rollbacks"] == 1 and final["trainer"]["lr_scale"] == 0.5
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tb"), size_guidance={"tensors": 0}).Reload()
    assert any("rollback" in tag for tag in events.Tags()["tensors"])


def test_faults_that_never_stop_end_the_run_as_diverged(tmp_path):
    steps = ",".join(str(s) for s in range(12, 60))
    _, summary = train([*MLP, "trainer.max_steps=60", "fault=nan_grad", f"fault.at=[{steps}]",
                        "guard.max_rollbacks=2"], tmp_path / "run")
    assert summary["status"] == "diverged"
    assert sum(e["kind"] == "rollback" for e in summary["events"]) == 2
    assert "rollback" in summary["reason"]


def test_loss_spike_is_skipped_without_touching_parameters(tmp_path):
    cfg = compose_cfg([*MLP, "trainer.max_steps=40", "fault=spike", "fault.at=[30]", "fault.scale=1000"])
    built = assemble(validate_config(cfg), tmp_path, torch.device("cpu"), resume_from=None)
    trainer = built.trainer
    for _ in range(29):  # as `fit` drives it: the guard hears its verdicts at logging steps
        trainer.advance()
    assert built.train_step.skip_on_device  # the default fused AdamW: the skip happens inside step()
    params = [p.detach().clone() for p in built.raw_model.parameters()]
    moments = [{k: v.clone() for k, v in s.items()} for s in built.optimizer.state.values()]
    trainer.update()  # step 30: loss x1000
    trainer.settle()
    assert trainer.state.skipped_steps == 1 and trainer.state.events[-1]["kind"] == "skip_spike"
    assert all(torch.equal(a, b) for a, b in zip(params, built.raw_model.parameters()))
    for before, after in zip(moments, built.optimizer.state.values()):  # moments and step counts
        assert before.keys() == after.keys() and all(torch.equal(v, after[k]) for k, v in before.items())
    trainer.update()  # an ordinary step moves the parameters again
    assert not all(torch.equal(a, b) for a, b in zip(params, built.raw_model.parameters()))


@pytest.mark.parametrize("fused", [True, False])
def test_fp16_overflow_skips_the_update_and_backs_off_the_scale(tmp_path, fused):
    cfg = compose_cfg([*MLP, "trainer.max_steps=40", "precision=fp16", f"optim.fused={fused}",
                       "fault=nan_grad", "fault.at=[6]"])
    built = assemble(validate_config(cfg), tmp_path, torch.device("cpu"), resume_from=None)
    trainer = built.trainer
    for _ in range(5):
        trainer.update()
    params = [p.detach().clone() for p in built.raw_model.parameters()]
    moments = [{k: v.clone() for k, v in s.items()} for s in built.optimizer.state.values()]
    scale = built.precision.scaler.get_scale()
    trainer.update()  # step 6: NaN gradients, which fp16 reads as an overflow
    trainer.settle()
    assert trainer.state.overflow_steps == 1 and trainer.state.skipped_steps == 0
    assert built.precision.scaler.get_scale() == scale / 2
    assert all(torch.equal(a, b) for a, b in zip(params, built.raw_model.parameters()))
    for before, after in zip(moments, built.optimizer.state.values()):
        assert all(torch.equal(v, after[k]) for k, v in before.items())


def _guard(window: int = 8) -> Guard:
    return Guard(GuardConfig(spike_window=window, spike_min_history=4), DistInfo(), torch.device("cpu"))


def test_guard_judges_on_the_device_against_the_losses_it_was_told():
    guard = _guard()
    judge = lambda loss, norm=1.0, scaling=False: int(guard.judge(torch.tensor(loss), torch.tensor(norm), scaling)[0])
    assert judge(50.0) == Verdict.OK  # too few losses remembered: spikes are not judged yet
    guard.remember([1.0, 1.1, 0.9])
    assert judge(50.0) == Verdict.OK and math.isinf(guard.limit.item())
    guard.remember([1.0])  # the fourth: min_history reached
    assert judge(50.0) == Verdict.SPIKE and judge(1.05) == Verdict.OK
    logs = [math.log(x) for x in (1.0, 1.1, 0.9, 1.0)]
    expected = math.exp(statistics.fmean(logs) + 6.0 * statistics.pstdev(logs))  # z = 6 on log losses
    assert guard.limit.item() == pytest.approx(expected, rel=1e-6)
    assert judge(float("nan")) == Verdict.NONFINITE and judge(1.0, float("inf"), True) == Verdict.OVERFLOW


def test_guard_state_round_trips():
    guard = _guard()
    losses = [2.0, 1.9, 1.8, 1.85, 1.7, 1.75, 1.6, 1.65, 1.5, 1.55, 1.4]  # 11 > 8: the oldest fall out
    guard.remember(losses)
    guard.record_bad(7)
    resumed = _guard()
    resumed.load_state_dict(guard.state_dict())
    assert list(resumed.history) == list(guard.history) == pytest.approx([math.log(x) for x in losses[-8:]])
    assert resumed.limit.item() == guard.limit.item() and resumed.bad_steps == [7]


def test_without_guard_a_nan_update_poisons_the_run(tmp_path):
    """The control for the tests above: the guard is what saves them."""
    _, summary = train([*MLP, "trainer.max_steps=20", "guard=off", "fault=nan_grad", "fault.at=[5]"], tmp_path / "r")
    assert summary["status"] == "diverged" and summary["skipped_steps"] == 0


def test_early_stopping_counts_across_resume(tmp_path):
    # lr 0 after warmup: val loss cannot improve, so patience runs out
    overrides = [*MLP, "trainer.max_steps=200", "trainer.eval_every=10", "early_stop=default",
                 "early_stop.patience=3", "early_stop.min_delta=0.5", "schedule=constant", "schedule.warmup=0"]
    _, straight = train(overrides, tmp_path / "straight")
    assert straight["status"] == "early_stopped"
    _, first = train([*overrides, "trainer.stop_after=30"], tmp_path / "pieces")
    assert first["status"] == "stopped"
    _, second = train([*overrides, "resume=auto"], tmp_path / "pieces")
    assert second["status"] == "early_stopped" and second["steps"] == straight["steps"]


def test_monitors_hook_only_logging_steps(tmp_path):
    cfg = compose_cfg([*MLP, "trainer.max_steps=10", "monitor=full", "monitor.every=5", "model.depth=3"])
    built = assemble(validate_config(cfg), tmp_path, torch.device("cpu"), resume_from=None)
    trainer = built.trainer
    hooks_seen = []
    for step in range(1, 11):
        before = sum(len(m._forward_hooks) for m in built.raw_model.modules())
        trainer.update()
        hooks_seen.append(before)
        metrics, _ = built.train_step.monitor.pop()
        if step % 5 == 0:
            assert any(k.startswith("grad_norm/") for k in metrics)
            assert any(k.startswith("update_ratio/") for k in metrics)
            assert any(k.startswith("act_dead/") for k in metrics)
            assert all(math.isfinite(v.item()) for v in metrics.values())
        else:
            assert metrics == {}
    assert len(set(hooks_seen)) == 1  # monitor hooks never outlive their logging step


def test_update_ratio_and_norms_are_what_they_claim(tmp_path):
    cfg = compose_cfg([*MLP, "trainer.max_steps=10", "trainer.log_every=1", "monitor=basic", "monitor.every=1", "optim=sgd", "clip=null"])
    built = assemble(validate_config(cfg), tmp_path, torch.device("cpu"), resume_from=None)
    trainer = built.trainer
    name, param = next(iter(built.raw_model.named_parameters()))
    before = param.detach().clone()
    trainer.update()
    metrics, _ = built.train_step.monitor.pop()
    after = param.detach()
    assert metrics[f"update_ratio/{name}"].item() == pytest.approx(((after - before).norm() / after.norm()).item(), rel=1e-4)
    assert metrics[f"param_norm/{name}"].item() == pytest.approx(after.norm().item(), rel=1e-5)
    assert metrics[f"grad_norm/{name}"].item() > 0


def test_monitor_cadence_is_stateless_and_bounded():
    from harness.training.monitor import Monitor, MonitorConfig

    monitor = Monitor(MonitorConfig(level="basic", every=100), torch.nn.Linear(2, 2))
    due = [s for s in range(1, 1001) if s % 25 == 0 and monitor.due(s, log_every=25)]
    assert due == list(range(100, 1001, 100))
    due = [s for s in range(1, 301) if s % 7 == 0 and monitor.due(s, log_every=7)]
    assert due == [105, 203]  # the first logging step at or after each multiple of 100


NAN_ROWS = ["data=custom", "data._target_=user_code.blobs_with_nan_rows", "data.input_key=features",
            "data.target_key=label", "model=mlp", "model.width=32", "logger=none", "trainer.log_every=5",
            "trainer.eval_every=20", "batch_size=32", "trainer.max_steps=60", "trainer.ckpt_every=60",
            "schedule.warmup=5", "optim.lr=3e-3"]


def test_skips_caused_by_samples_name_them_and_cost_no_rollback(tmp_path):
    _, summary = train([*NAN_ROWS, "guard.rollback_after=3", "guard.rollback_window=60"], tmp_path / "run")
    skips = [e for e in summary["events"] if e["kind"] == "skip_nonfinite"]
    assert len(skips) >= 3 and all(e["data_cause"] for e in skips)
    assert all(e["samples"] and {s["index"] for s in e["samples"]} <= {7, 300} for e in skips)
    assert "samples 300 (loss nan, input norm inf) stand out from the batch" in " ".join(e["message"] for e in skips)
    assert summary["status"] == "completed" and not any(e["kind"] == "rollback" for e in summary["events"])
    assert load_checkpoint(step_checkpoints(tmp_path / "run")[0])["trainer"]["lr_scale"] == 1.0


def test_with_cut_lr_for_data_the_same_skips_roll_back_and_cut_the_lr_until_the_run_is_lost(tmp_path):
    _, summary = train([*NAN_ROWS, "guard.cut_lr_for_data=true", "guard.rollback_after=3", "guard.rollback_window=60"],
                       tmp_path / "run")
    rollbacks = [e for e in summary["events"] if e["kind"] == "rollback"]
    assert rollbacks and all(e["data_cause"] for e in rollbacks) and "LR x0.5" in rollbacks[0]["message"]
    assert summary["status"] == "diverged" and "inspect, fix or drop them" in summary["reason"]


def test_skips_the_model_caused_still_cut_the_lr(tmp_path):
    _, summary = train([*MLP, "trainer.max_steps=40", "fault=inf_loss", "fault.at=[22,23,24,25]"], tmp_path / "run")
    skips = [e for e in summary["events"] if e["kind"] == "skip_nonfinite"]
    assert skips and not any(e["data_cause"] for e in skips) and "no sample stands out" in skips[0]["message"]
    assert summary["events"][-1]["kind"] != "rollback" or "LR x0.5" in summary["events"][-1]["message"]
    assert any(e["kind"] == "rollback" and "LR x0.5" in e["message"] for e in summary["events"])


@pytest.mark.parametrize("snapshot_every, back_to", [(50, 100), ("null", 0)])
def test_a_rollback_loses_a_bounded_number_of_steps_whatever_the_checkpoint_cadence(tmp_path, snapshot_every,
                                                                                    back_to):
    _, summary = train([*MLP, "trainer.max_steps=140", "trainer.ckpt_every=1000", "fault=inf_loss",
                        "fault.at=[122,123,124,125]", f"guard.snapshot_every={snapshot_every}"], tmp_path / "run")
    rollback = next(e for e in summary["events"] if e["kind"] == "rollback")
    assert f"rolled back to step {back_to} " in rollback["message"]
    assert ("guard's snapshot" in rollback["message"]) is (snapshot_every != "null")
    assert summary["status"] == "completed" and summary["steps"] == 140


def test_attribution_tells_one_bad_sample_from_a_bad_model():
    from harness.training.attribution import attribute
    from harness.models.output import OutputPicker

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
    x[5] *= 1e3  # a unit mix-up in one row
    found = attribute(model, OutputPicker("auto"), x, y, list(range(100, 132)), "classification")
    assert found.data_cause and found.samples[0]["index"] == 105 and found.samples[0]["input_norm"] > 1e3
    assert model.training  # left as it was found
    with torch.no_grad():
        model[2].weight.mul_(1e3)  # every sample's loss blows up: the model, not the data
    found = attribute(model, OutputPicker("auto"), x / torch.tensor([1e3 if i == 5 else 1.0 for i in range(32)])[:, None],
                      y, list(range(32)), "classification")
    assert not found.data_cause and "no sample stands out" in found.describe()
