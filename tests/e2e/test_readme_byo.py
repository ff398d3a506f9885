"""README's "Bring your own model and data" examples, run as written (files and commands taken from README)."""
from __future__ import annotations

import json
import re
import shlex
import sys

import pytest
import torch

from apps.sweep_helpers import load_study
from conftest import ROOT
import warm_train
from harness.logger.tracking import read_metrics

SECTION = (ROOT / "docs" / "bring-your-own.md").read_text()
EXAMPLES = dict(re.findall(r"^## (Example \d)[^\n]*\n(.*?)(?=^## )", SECTION, re.S | re.M))


def files_and_commands(text: str) -> tuple[dict[str, str], list[str]]:
    files = {block.splitlines()[0].split()[1].rstrip(":"): block
             for block in re.findall(r"```python\n(.*?)```", text, re.S)}
    commands = [line for block in re.findall(r"```bash\n(.*?)```", text, re.S)
                for line in block.splitlines() if line.strip() and not line.startswith("#")]
    return files, commands


def run_example(name: str, tmp_path) -> list:
    files, commands = files_and_commands(EXAMPLES[name])
    assert files and commands
    for file_name, body in files.items():
        (tmp_path / file_name).write_text(body)
    run_dirs = []
    for i, command in enumerate(commands):
        args = shlex.split(command)
        assert args[0] == "python"
        if args[1] == "train.py":  # as typed in a clone, plus a run dir of the test's own
            run_dirs.append(tmp_path / f"run{i}")
            args = [str(ROOT / "train.py"), *args[2:], f"hydra.run.dir={run_dirs[-1]}", "diagnose=false"]
        else:
            args = args[1:]
        result = warm_train.run([sys.executable, *args], cwd=tmp_path, timeout=600)
        assert result.returncode == 0, f"{command}\n{result.stderr[-3000:]}"
    return run_dirs


def falling_loss(run_dir) -> tuple[float, float]:
    losses = [r["train/loss"] for r in read_metrics(run_dir) if "train/loss" in r]
    return losses[0], losses[-1]


def test_docs_have_nine_examples():
    assert sorted(EXAMPLES) == [f"Example {i}" for i in range(1, 10)]


def test_example_4_a_callback_from_the_current_directory_logs_its_metric(tmp_path):
    (run_dir,) = run_example("Example 4", tmp_path)
    rows = {r["step"]: r["custom/weight_norm"] for r in read_metrics(run_dir) if r["kind"] == "custom"}
    assert sorted(rows) == [10, 20, 30, 40]
    final = torch.load(run_dir / "checkpoints" / "step_00000040.pt", weights_only=False)["model"]
    tensors = {v.data_ptr(): v for v in final.values()}  # a tied embedding is saved once, under two names
    expected = torch.stack([v.float().norm() for v in tensors.values()]).norm().item()
    assert rows[40] == pytest.approx(expected, rel=1e-5)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 40


@pytest.mark.trajectory
def test_example_1_a_module_in_the_current_directory(tmp_path):
    (run_dir,) = run_example("Example 1", tmp_path)
    first, last = falling_loss(run_dir)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed" and last < first - 1.0


@pytest.mark.trajectory
def test_example_2_a_dataset_factory(tmp_path):
    (run_dir,) = run_example("Example 2", tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["best_val_accuracy"] > 0.95


@pytest.mark.trajectory
def test_example_3_a_local_hf_checkpoint_and_dataset(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    pytest.importorskip("datasets", reason="the hf extra is not installed")
    (run_dir,) = run_example("Example 3", tmp_path)
    first, last = falling_loss(run_dir)
    assert last < first


def _rows(run_dir, kind: str) -> list[dict]:
    return [r for r in read_metrics(run_dir) if r["kind"] == kind]


@pytest.mark.trajectory
def test_example_5_a_vae_logs_reconstruction_and_kl(tmp_path):
    (run_dir,) = run_example("Example 5", tmp_path)
    first, last = falling_loss(run_dir)
    evals = _rows(run_dir, "eval")
    assert last < 0.8 * first
    assert {"val/loss/recon", "val/loss/kl"} <= set(evals[-1]) and evals[-1]["val/loss/kl"] > 0
    assert evals[-1]["val/loss"] == pytest.approx(evals[-1]["val/loss/recon"] + 0.5 * evals[-1]["val/loss/kl"],
                                                  rel=1e-4)


@pytest.mark.trajectory
def test_example_6_a_contrastive_model_learns_to_pair_its_views(tmp_path):
    (run_dir,) = run_example("Example 6", tmp_path)
    first, last = falling_loss(run_dir)
    evals = _rows(run_dir, "eval")
    assert last < first and "train/loss/top1" not in _rows(run_dir, "train")[-1]
    assert evals[-1]["val/top1"] > 0.1  # over 3x chance: one partner in a batch of 32


@pytest.mark.trajectory
def test_example_7_an_hf_classifier_trains_on_its_own_loss(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    (run_dir,) = run_example("Example 7", tmp_path)
    first, last = falling_loss(run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert first > 0.5 and last < 0.3 and summary["user_loss"] == "model"


@pytest.mark.trajectory
def test_example_8_a_two_head_model_logs_each_head(tmp_path):
    (run_dir,) = run_example("Example 8", tmp_path)
    first, last = falling_loss(run_dir)
    row = _rows(run_dir, "eval")[-1]
    assert last < first and {"val/loss/digit", "val/loss/ink"} <= set(row)
    assert row["val/loss"] == pytest.approx(row["val/loss/digit"] + 0.5 * row["val/loss/ink"], rel=1e-4)


def test_example_9_a_tagger_is_kept_and_swept_by_its_f1(tmp_path):
    run_dir, _ = run_example("Example 9", tmp_path)
    summary = json.loads((run_dir / "summary.json").read_text())
    evals = _rows(run_dir, "eval")
    best = max(evals, key=lambda row: row["val/f1"])
    assert summary["monitor"]["best_step"] == best["step"] and summary["objective"] == best["val/f1"]
    assert all({"val/f1", "val/recall", "val/label_accuracy"} <= set(row) for row in evals)
    (sweep,) = tmp_path.glob("multirun/*/*/sweep_summary.json")
    report = json.loads(sweep.read_text())
    study = load_study(sweep.parent)
    assert report["metric_names"] == ["best_val_f1"] and len(study.trials) == 3
    for trial in study.trials:  # its value is its best F1; the pruner saw its F1 at every eval
        f1 = {row["step"]: row["val/f1"] for row in _rows(sweep.parent / str(trial.number), "eval")}
        assert trial.intermediate_values == f1 and trial.values == [max(f1.values())]
    assert report["best_trial"]["values"] == [max(t.values[0] for t in study.trials)]
