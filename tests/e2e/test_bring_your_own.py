"""Your own model and your own data: any nn.Module, any map-style Dataset, through the DataLoader
seam, with exact resume, accumulation and world-size invariance kept."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import user_code
from conftest import ROOT, compose_cfg, run_cli, train
from harness.state.checkpoint import latest_valid_checkpoint, load_checkpoint, step_checkpoints
from harness.core.errors import ConfigError
from harness.models.output import OutputPicker
from harness.modes.run import run
from harness.logger.tracking import read_metrics

TESTS = ROOT / "tests"
USER_ENV = {"PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))}
BLOBS = ["data=custom", "data._target_=user_code.blobs", "data.input_key=features", "data.target_key=label",
         "model=mlp"]
SMALL_MLP = ["model.width=32", "model.depth=2"]
SHORT = ["trainer.max_steps=12", "trainer.log_every=1", "trainer.eval_every=4", "trainer.ckpt_every=4",
         "schedule.warmup=2", "batch_size=16", "logger=none"]
LSTM = ["model._target_=user_code.LSTMNet", "+model.hidden=16", "model.block_size=16"]


def params(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(step_checkpoints(run_dir)[0])["model"]


def assert_same_bits(a: Path, b: Path) -> None:
    pa, pb = params(a), params(b)
    assert pa.keys() == pb.keys()
    for key in pa:
        assert torch.equal(pa[key], pb[key]), key
    assert [r.get("train/loss") for r in read_metrics(a)] == [r.get("train/loss") for r in read_metrics(b)]


# ---------------------------------------------------------------- your own model
def test_gpt_defaults_never_reach_a_user_model(tmp_path, monkeypatch):
    record = tmp_path / "kwargs.json"
    monkeypatch.setenv("RECORD_KWARGS", str(record))
    _, summary = train([*LSTM, "model.n_layer=2", *SHORT], tmp_path / "run")
    # n_layer=2 was set by the caller, so it is passed; gpt's n_head/n_embd defaults are not
    assert json.loads(record.read_text()) == {"vocab_size": summary_vocab(tmp_path / "run"), "hidden": 16, "n_layer": 2}
    assert summary["status"] == "completed"


def summary_vocab(run_dir: Path) -> int:
    return load_checkpoint(step_checkpoints(run_dir)[0])["model"]["emb.weight"].shape[0]


def test_untouched_gpt_defaults_are_dropped(tmp_path, monkeypatch):
    record = tmp_path / "kwargs.json"
    monkeypatch.setenv("RECORD_KWARGS", str(record))
    train([*LSTM, *SHORT, "trainer.max_steps=4"], tmp_path / "run")
    assert json.loads(record.read_text())["n_layer"] == 1  # its own default, not gpt's n_layer=4


def test_a_module_in_the_working_directory_gets_the_keys_named_on_the_command_line(tmp_path):
    """mymodels.py beside the command; model.n_layer=4 equals gpt's default, but the user typed it: it arrives."""
    (tmp_path / "mymodels.py").write_text((TESTS / "user_code.py").read_text())
    record = tmp_path / "kwargs.json"
    result = run_cli(["model._target_=mymodels.LSTMNet", "+model.hidden=8", "model.n_layer=4", "model.block_size=8",
                      "debug=smoke", "logger=none", "diagnose=false", "hydra.run.dir=run"], cwd=tmp_path,
                     env={"RECORD_KWARGS": str(record)})
    assert result.returncode == 0, result.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").exists()
    assert json.loads(record.read_text())["n_layer"] == 4 and json.loads(record.read_text())["hidden"] == 8


@pytest.mark.trajectory
def test_a_torch_nn_model_not_written_here_trains_and_its_loss_falls(tmp_path):
    _, summary = train([*BLOBS, "model._target_=torch.nn.LazyLinear",
                        "trainer.max_steps=60", "trainer.eval_every=30", "trainer.log_every=10", "batch_size=32",
                        "optim.lr=3e-2", "logger=none"], tmp_path / "run")
    losses = [r["train/loss"] for r in read_metrics(tmp_path / "run") if "train/loss" in r]
    assert summary["status"] == "completed" and losses[-1] < 0.5 * losses[0]
    assert summary["best_val_accuracy"] > 0.9


@pytest.mark.trajectory
@pytest.mark.parametrize("returns,model_output", [("tuple", "auto"), ("dict", "auto"), ("two_fields", "scores")])
def test_tuple_and_dict_outputs_train(tmp_path, returns, model_output):
    _, summary = train([*BLOBS, "model._target_=user_code.Classifier", f"+model.returns={returns}",
                        f"model_output={model_output}", *SHORT], tmp_path / "run")
    assert summary["status"] == "completed" and summary["best_val_loss"] < 1.386  # below ln 4


def test_output_picker_reads_every_shape_of_output():
    t = torch.ones(2, 3)
    assert OutputPicker()(t) is t
    assert OutputPicker()((t, None)) is t
    assert OutputPicker(1)((None, t)) is t
    assert OutputPicker()({"logits": t, "aux": 0}) is t
    assert OutputPicker("aux")({"logits": 0, "aux": t}) is t
    with pytest.raises(ValueError, match="set model_output"):
        OutputPicker()({"a": t, "b": t})


# ---------------------------------------------------------------- your own data
def test_user_dataset_with_random_augmentation_resumes_bit_exact_with_workers(tmp_path):
    """Two DataLoader workers, float64 numpy samples, transforms drawn from numpy/torch/python RNGs."""
    overrides = [*BLOBS, *SMALL_MLP, "+data.noise=0.3", "data.num_workers=2", "model.dropout=0.1", *SHORT]
    straight, pieces = tmp_path / "straight", tmp_path / "pieces"
    train(overrides, straight)
    train([*overrides, "trainer.stop_after=6"], pieces)
    train([*overrides, "resume=auto"], pieces)
    assert_same_bits(straight, pieces)


def test_workers_do_not_change_the_numbers(tmp_path):
    base = [*BLOBS, *SMALL_MLP, "+data.noise=0.3", *SHORT]
    train([*base, "data.num_workers=0"], tmp_path / "w0")
    train([*base, "data.num_workers=2", "data.prefetch_factor=3"], tmp_path / "w2")
    assert_same_bits(tmp_path / "w0", tmp_path / "w2")


def test_accumulation_invariance_with_a_user_dataset(tmp_path):
    base = [*BLOBS, *SMALL_MLP, "+data.noise=0.3", *SHORT, "batch_size=32"]
    train([*base, "accum=1"], tmp_path / "a1")
    train([*base, "accum=4", "data.num_workers=1"], tmp_path / "a4")
    a, b = params(tmp_path / "a1"), params(tmp_path / "a4")
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-5


def test_tensor_dataset_reads_num_classes_from_its_labels(tmp_path):
    _, summary = train(["data=custom", "data._target_=user_code.pairs", "model=mlp", "model.width=16",
                        *SHORT], tmp_path / "run")
    assert summary["status"] == "completed" and summary["chance_loss"] == pytest.approx(1.3863, abs=1e-4)


@pytest.mark.trajectory
def test_scalar_regression_targets_meet_one_prediction_per_sample(tmp_path):
    """[B, 1] predictions against [B] targets: a broadcast [B, B] loss could not fall below var(y) ~ 2.6."""
    _, summary = train(["data=custom", "data._target_=user_code.scalar_targets", "data.task=regression",
                        "model=mlp", "model._target_=torch.nn.Linear", *SHORT, "trainer.max_steps=60",
                        "trainer.eval_every=60", "optim.lr=3e-2", "optim.weight_decay=0"], tmp_path / "run")
    assert summary["status"] == "completed" and summary["best_val_loss"] < 0.05


def test_user_collate_fn_sees_the_samples(tmp_path):
    _, summary = train([*BLOBS, *SMALL_MLP, "data.collate_fn=test_bring_your_own.stack_fields", *SHORT,
                        "data.num_workers=1"], tmp_path / "run")
    assert summary["status"] == "completed"


def stack_fields(samples: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    """A collate_fn as users write one: dict samples in, (x, y) out."""
    x = torch.stack([torch.as_tensor(s["features"], dtype=torch.float32) for s in samples])
    return x, torch.tensor([s["label"] for s in samples])


def test_a_worker_that_raises_fails_in_one_line_and_leaves_a_valid_checkpoint(tmp_path):
    # sample 7 sits in a late batch of the first epoch: steps before it train and checkpoint
    result = run_cli([*BLOBS, *SMALL_MLP, "+data.fail_at=7", "data.num_workers=2", "trainer.max_steps=200",
                      "trainer.ckpt_every=2", "batch_size=16", "schedule.warmup=2", "logger=none", "diagnose=false",
                      "guard=off", f"hydra.run.dir={tmp_path / 'run'}"], env=USER_ENV)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    (error,) = [line for line in lines if line.startswith("error:")]
    assert error.startswith("error: data: train sample 7 could not be read: OSError: corrupt record 7")
    assert any(line.startswith(f'  File "{ROOT / "tests" / "user_code.py"}"') for line in lines)  # from the worker
    assert "Traceback" not in result.stderr
    found = latest_valid_checkpoint(tmp_path / "run")
    assert found is not None and 0 < found[1]["step"] < 200


# ---------------------------------------------------------------- bad input: one line, before any file is written
BAD = [
    (["model._target_=no_such_module.Net"], "model._target_", "no module 'no_such_module'"),
    (["model._target_=user_code.NoSuchNet"], "model._target_", "has no NoSuchNet"),
    (["model._target_=user_code.Exploding"], "model._target_", "raised ValueError: cannot build"),
    (["model._target_=user_code.BrokenForward"], "model._target_", "forward raised RuntimeError"),
    (["model._target_=user_code.not_a_module"], "model._target_", "returns a torch.nn.Module"),
    (["model._target_=user_code.Classifier", "+model.returns=wrong_width"], "model._target_", "expected float logits"),
    (["model._target_=user_code.Classifier", "+model.returns=ints"], "model._target_", "expected float logits"),
    (["model._target_=user_code.Classifier", "+model.returns=two_fields"], "model_output", "scores"),
    (["model._target_=user_code.Classifier", "model_output=nope"], "model_output", "returns a plain tensor"),
    (["model._target_=user_code.Classifier", "+model.width2=3"], "model.width2", "which takes"),
    (["data._target_=user_code.no_such"], "data._target_", "has no no_such"),
    (["data._target_=user_code.raising_factory"], "data._target_", "FileNotFoundError"),
    (["data._target_=user_code.one_dataset"], "data._target_", "(train, val)"),
    (["data._target_=user_code.streaming"], "data._target_", "map-style"),
    (["data._target_=user_code.bad_labels", "data.num_classes=5"], "data.num_classes", "[0, 6]"),
    (["data._target_=user_code.float_labels"], "data.task", "integer label"),
    (["data._target_=user_code.no_class_count"], "data.num_classes", "an integer"),
    (["data._target_=user_code.labels_scaled_with_pixels"], "data.num_classes", "every training label"),
    (["data._target_=user_code.blobs", "data.input_key=x"], "data.input_key", "['features', 'label']"),
    (["+data.root=/x"], "data.root", "which takes"),
    (["data.task=ranking"], "data.task", "ranking"),
    (["data.num_workers=-1"], "data.num_workers", "-1"),
    (["data.pin_memory=maybe"], "data.pin_memory", "maybe"),
    (["data.prefetch_factor=0"], "data.prefetch_factor", "0"),
    (["data.persistent_workers=sometimes"], "data.persistent_workers", "sometimes"),
    (["data.collate_fn=user_code.nothing_here"], "data.collate_fn", "has no nothing_here"),
]


def _bad_cfg(overrides: list[str]):
    return compose_cfg([*BLOBS, "debug=smoke", "logger=none", "diagnose=false", *overrides])


@pytest.mark.parametrize("overrides,key,fragment", BAD, ids=[" ".join(b[0]) for b in BAD])
def test_bad_user_code_and_data_fail_in_one_line_before_any_file(tmp_path, overrides, key, fragment):
    with pytest.raises(ConfigError) as err:
        run(_bad_cfg(overrides), run_dir=tmp_path / "run")
    message = str(err.value)
    assert err.value.key == key and "\n" not in message and fragment in message, message
    assert not (tmp_path / "run").exists()


def test_cli_user_model_error_is_one_line_plus_the_frames_in_the_users_file(tmp_path):
    """An error raised in the user's own code: the one line, then where in their file (no frame of
    the harness, torch or Hydra), and the run dir's train.log keeps both."""
    result = run_cli(["model._target_=user_code.Exploding", "model=mlp", "data=synthetic",
                      f"hydra.run.dir={tmp_path / 'run'}"], env=USER_ENV)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    line, *frames = result.stderr.strip().splitlines()
    assert line == ("error: model._target_='user_code.Exploding' is invalid: a model that builds: "
                    "Exploding(in_features=32) raised ValueError: cannot build for 32 features")
    user_file = ROOT / "tests" / "user_code.py"
    assert frames[0].startswith(f'  File "{user_file}", line ') and frames[0].endswith("in __init__")
    assert "raise ValueError" in frames[1] and frames[-1].startswith("(the frames above are in your code")
    assert all("harness" not in f and "site-packages" not in f for f in frames[:-1])
    assert f'File "{user_file}"' in (tmp_path / "run" / "train.log").read_text()


@pytest.mark.trajectory
def test_doctor_and_lr_find_work_on_a_user_model(tmp_path):
    common = [*BLOBS, "model._target_=user_code.Classifier", "debug=smoke", "logger=none"]
    assert run(compose_cfg([*common, "mode=doctor"]), run_dir=tmp_path / "doctor") == 0
    assert (tmp_path / "doctor" / "doctor.md").exists()
    suggestion = run(compose_cfg([*common, "mode=lr_find", "lr_find.num_steps=20"]), run_dir=tmp_path / "lr")
    assert suggestion > 0


# ---------------------------------------------------------------- Hugging Face (the hf extra)
@pytest.mark.trajectory
def test_tiny_gpt2_from_config_trains_30_steps_on_the_stdlib_corpus(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    _, summary = train(["model=hf_causal_lm", "model.block_size=32", "trainer.max_steps=30", "trainer.log_every=5",
                        "trainer.eval_every=30", "batch_size=16", "schedule.warmup=3", "optim.lr=3e-3",
                        "logger=none"], tmp_path / "run")
    losses = [r["train/loss"] for r in read_metrics(tmp_path / "run") if "train/loss" in r]
    assert summary["status"] == "completed" and losses[-1] < losses[0] - 1.0


@pytest.mark.trajectory
def test_a_datasets_dataset_on_disk_trains_an_mlp(tmp_path):
    datasets = pytest.importorskip("datasets", reason="the hf extra is not installed")
    train_set, val_set = (blob_rows(d) for d in user_code.blobs())
    features = datasets.Features({"x": datasets.Sequence(datasets.Value("float32"), length=16),
                                  "label": datasets.ClassLabel(num_classes=4)})
    datasets.DatasetDict({split: datasets.Dataset.from_dict(rows, features=features)
                          for split, rows in (("train", train_set), ("test", val_set))}).save_to_disk(str(tmp_path / "ds"))
    _, summary = train(["data=hf", f"data.path={tmp_path / 'ds'}", "data.task=classification", "data.input_key=x",
                        "data.val_split=test", "model=mlp", "model.width=32", *SHORT, "trainer.max_steps=40",
                        "optim.lr=1e-2"], tmp_path / "run")
    assert summary["status"] == "completed" and summary["chance_loss"] == pytest.approx(1.3863, abs=1e-4)
    assert summary["best_val_accuracy"] > 0.9


def blob_rows(dataset) -> dict[str, list]:
    samples = [dataset[i] for i in range(len(dataset))]
    return {"x": [s["features"].astype("float32") for s in samples], "label": [s["label"] for s in samples]}


@pytest.mark.parametrize("overrides,key,fragment", [
    (["data.path=/nonexistent"], "data.path", "save_to_disk"),
    (["data.format=xml"], "data.format", "xml"),
    (["data.tokenizer=/nonexistent"], "data.tokenizer", "char"),
    (["data.task=classification"], "data.input_key", "feature column"),
])
def test_hf_data_bad_input_is_one_line(tmp_path, overrides, key, fragment):
    pytest.importorskip("datasets", reason="the hf extra is not installed")
    with pytest.raises(ConfigError) as err:
        run(compose_cfg(["data=hf", f"data.path={tmp_path}", *overrides, "debug=smoke"]), run_dir=tmp_path / "run")
    assert err.value.key == key and fragment in str(err.value)
    assert not (tmp_path / "run").exists()


def test_two_ranks_with_workers_equal_one_process_on_a_user_dataset(tmp_path, monkeypatch):
    from test_distributed import final_params, run_dirs, torchrun

    monkeypatch.setenv("PYTHONPATH", USER_ENV["PYTHONPATH"])
    overrides = [*BLOBS, *SMALL_MLP, "+data.noise=0.3", *SHORT, "batch_size=64", "diagnose=false"]
    torchrun([*overrides, "data.num_workers=1"], cwd=tmp_path)
    (ddp_dir,) = run_dirs(tmp_path)
    train(overrides, tmp_path / "single")
    a, b = final_params(ddp_dir), final_params(tmp_path / "single")
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-6


@pytest.mark.trajectory
def test_a_local_csv_file_with_scalar_feature_columns(tmp_path):
    pytest.importorskip("datasets", reason="the hf extra is not installed")
    rng = torch.Generator().manual_seed(0)
    a, b = torch.randn(400, generator=rng), torch.randn(400, generator=rng)
    rows = "\n".join(f"{x:.4f},{y:.4f},{int(x + y > 0)}" for x, y in zip(a.tolist(), b.tolist()))
    (tmp_path / "points.csv").write_text("a,b,label\n" + rows + "\n")
    _, summary = train(["data=hf", "data.format=csv", f"data.path={tmp_path / 'points.csv'}", "data.task=classification",
                        "data.input_key=[a,b]", "data.num_classes=2", "model=mlp", "model.width=16", *SHORT,
                        "trainer.max_steps=40", "optim.lr=1e-2"], tmp_path / "run")
    assert summary["status"] == "completed" and summary["best_val_accuracy"] > 0.9


def _text_dataset(tmp_path) -> tuple[str, str]:
    """A local text-classification dataset (save_to_disk) and a word-level tokenizer.json for it."""
    datasets = pytest.importorskip("datasets", reason="the hf extra is not installed")
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["good", "bad", "plot", "film", "actor", "scene", "music", "story", "long", "short"]
    rng = np.random.default_rng(0)

    def rows(n: int) -> dict[str, list]:
        texts = [" ".join(rng.choice(words, size=rng.integers(4, 12))) for _ in range(n)]
        return {"text": texts, "label": [int(t.split().count("good") > t.split().count("bad")) for t in texts]}

    features = datasets.Features({"text": datasets.Value("string"), "label": datasets.ClassLabel(num_classes=2)})
    datasets.DatasetDict({split: datasets.Dataset.from_dict(rows(n), features=features)
                          for split, n in (("train", 1024), ("validation", 256))}).save_to_disk(str(tmp_path / "ds"))
    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    return str(tmp_path / "ds"), str(tmp_path / "tokenizer.json")


@pytest.mark.trajectory
def test_hf_text_classification_trains_a_sequence_classifier_on_its_own_loss(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra is not installed")
    path, tokenizer = _text_dataset(tmp_path)
    text = ["data=hf", f"data.path={path}", "data.task=classification", "data.val_split=validation",
            f"data.tokenizer={tokenizer}", "data.block_size=16", *SHORT, "trainer.max_steps=150", "optim.lr=3e-3"]
    _, summary = train([*text, "model._target_=user_code.tiny_bert", "loss.function=model"], tmp_path / "bert")
    losses = [r["train/loss"] for r in read_metrics(tmp_path / "bert") if "train/loss" in r]
    assert summary["status"] == "completed" and losses[-1] < 0.5 * losses[0]
    _, summary = train([*text, "model._target_=user_code.BagOfTokens"], tmp_path / "bag")  # the built-in loss
    assert summary["best_val_accuracy"] > 0.8
