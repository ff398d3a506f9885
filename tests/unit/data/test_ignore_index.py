"""Targets equal to loss.ignore_index (-100 by default) count nowhere, and an update whose
targets are all ignored is skipped as empty, not turned into a NaN."""
from __future__ import annotations

import math
import shutil

import pytest
import torch
import torch.nn.functional as F

from conftest import ROOT, compose_cfg, logged_train_losses, run_dirs, torchrun, train
from harness.assembly.assemble import assemble
from harness.config.run_config import validate_config
from harness.data.targets import target_shares
from harness.training.loss import compute_loss, per_sample_loss

PADDED = ["data=custom", "data._target_=user_code.padded_sequences", "data.task=lm",
          "model._target_=user_code.LSTMNet", "+model.hidden=32", "logger=none", "trainer.log_every=4",
          "trainer.eval_every=20", "trainer.ckpt_every=40", "batch_size=8", "trainer.max_steps=40",
          "schedule.warmup=2", "optim.lr=1e-2"]


def test_the_loss_is_the_mean_over_counted_targets_and_zero_when_none_count():
    logits = torch.randn(2, 5, 7, requires_grad=True)
    y = torch.randint(0, 7, (2, 5))
    y[0, 3:] = -100
    y[1, 1:] = -100
    keep = y != -100
    expected = F.cross_entropy(logits[keep], y[keep])
    assert compute_loss(logits, y, "lm").item() == pytest.approx(expected.item(), rel=1e-6)
    z = compute_loss(logits, y, "lm", z_loss=0.1) - compute_loss(logits, y, "lm")
    assert z.item() == pytest.approx(0.1 * torch.logsumexp(logits[keep], -1).pow(2).mean().item(), rel=1e-5)
    per_sample = per_sample_loss(logits, y, "lm")
    assert per_sample[1].item() == pytest.approx(F.cross_entropy(logits[1, :1], y[1, :1]).item(), rel=1e-6)

    empty = compute_loss(logits, torch.full((2, 5), -100), "lm", label_smoothing=0.1, z_loss=1e-4)
    empty.backward()
    assert empty.item() == 0.0 and torch.all(logits.grad == 0)


def test_a_configured_ignore_index_replaces_torchs():
    logits, y = torch.randn(4, 3), torch.tensor([0, 2, 1, 1])
    assert compute_loss(logits, y, "classification", ignore_index=1) == pytest.approx(
        F.cross_entropy(logits[:2], y[:2]).item(), rel=1e-6)


def test_micro_batches_are_weighted_by_their_counted_targets_so_accumulation_changes_nothing(tmp_path):
    """Padding falls unevenly across micro-batches: weighting their means by samples would give
    a sparse one's targets more weight than the same targets get in one big batch."""
    params = {}
    for accum in (1, 4):
        cfg = compose_cfg([*PADDED, f"accum={accum}", "trainer.log_every=1", "guard=off", "clip=null"])
        built = assemble(validate_config(cfg), tmp_path / str(accum), torch.device("cpu"), resume_from=None)
        trainer = built.trainer
        for _ in range(10):
            trainer.update()
        params[accum] = [p.detach().clone() for p in built.raw_model.parameters()]
        trainer.close()
    assert max((a - b).abs().max().item() for a, b in zip(params[1], params[4])) <= 1e-5
    shares = target_shares([torch.tensor([[1, -100], [-100, -100]]), torch.tensor([[2, 3], [4, -100]])], -100)
    assert shares == [0.25, 0.75] and target_shares([torch.full((2, 2), -100)], -100) is None


@pytest.mark.trajectory
@pytest.mark.parametrize("guard", ["default", "off"])
def test_updates_with_only_padding_are_skipped_counted_and_reported_not_nan(tmp_path, guard):
    """Samples 16-23 are padding only; read in order, every epoch's third update holds nothing else."""
    _, summary = train([*PADDED, f"guard={guard}", "data.shuffle=false", "+data.empty=[16,17,18,19,20,21,22,23]"],
                       tmp_path / "run")
    assert summary["status"] == "completed" and summary["skipped_steps"] == 0
    assert summary["empty_steps"] == 2  # 32 updates an epoch: steps 3 and 35
    empties = [e for e in summary["events"] if e["kind"] == "skip_empty"]
    assert [e["step"] for e in empties] == [3, 35] and "loss.ignore_index (-100)" in empties[0]["message"]
    assert math.isfinite(summary["final_train_loss"]) and summary["final_val_loss"] < 0.5 * summary["chance_loss"]


@pytest.mark.trajectory
def test_classification_with_unlabeled_samples_learns_and_measures_only_the_labeled(tmp_path):
    _, summary = train(["data=custom", "data._target_=user_code.labels_with_unlabeled", "model=mlp",
                        "model.width=32", "logger=none", "trainer.max_steps=60", "trainer.log_every=10",
                        "trainer.eval_every=30", "batch_size=32", "optim.lr=1e-2"], tmp_path / "run")
    from user_code import labels_with_unlabeled

    labels = labels_with_unlabeled()[0].tensors[1]
    counts = torch.bincount(labels[labels != -100], minlength=4).double()
    p = counts / counts.sum()
    assert summary["prior_loss"] == pytest.approx(float(-(p * p.log()).sum()), rel=1e-6)
    assert summary["best_val_accuracy"] > 0.8  # over labeled samples: unlabeled ones would cap it at ~0.7
    assert summary["empty_steps"] == 0 and summary["status"] == "completed"


def test_null_ignore_index_refuses_the_same_labels_naming_the_key(tmp_path, capsys):
    from harness.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"loss.ignore_index \(-100\)|\[0, 4\)") as err:
        train(["data=custom", "data._target_=user_code.labels_with_unlabeled", "model=mlp",
               "loss.ignore_index=null", "logger=none"], tmp_path / "run")
    assert "span [-100, 3]" in str(err.value) and not (tmp_path / "run" / "summary.json").exists()


def test_data_whose_sampled_targets_are_all_ignored_is_refused_naming_the_key(tmp_path):
    from harness.core.errors import ConfigError

    with pytest.raises(ConfigError, match="loss.ignore_index.*only ignored targets") as err:
        train(["data=custom", "data._target_=user_code.labels_with_unlabeled", "+data.unlabeled=1.0", "model=mlp",
               "logger=none"], tmp_path / "run")
    assert "-100" in str(err.value) and not (tmp_path / "run").exists()


def test_two_ranks_equal_one_process_when_their_padding_differs(tmp_path):
    """Each rank's micro-batch holds a different number of counted tokens: the gradients and the
    logged train loss are the mean over every rank's counted targets, as one process's are."""
    from harness.state.checkpoint import load_checkpoint, step_checkpoints

    run = [*PADDED, "trainer.max_steps=8", "trainer.eval_every=8", "trainer.ckpt_every=8", "diagnose=false"]
    shutil.copy(ROOT / "tests" / "user_code.py", tmp_path)  # modules are found where train.py starts
    torchrun(run, cwd=tmp_path)
    (ddp_dir,) = run_dirs(tmp_path)
    train(run, tmp_path / "single")
    assert logged_train_losses(ddp_dir) == pytest.approx(logged_train_losses(tmp_path / "single"), rel=1e-5)
    a, b = (load_checkpoint(step_checkpoints(d)[0])["model"] for d in (ddp_dir, tmp_path / "single"))
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-5
