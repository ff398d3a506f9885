"""The image and recurrent families: data=digits, model=resnet, model=rnn, data.shuffle, and the
batch-norm seams (eval-mode loss on training samples, epoch tails a micro-batch of one cannot take)."""
from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch
from omegaconf import OmegaConf

from conftest import CONF, compose_cfg, one_line_error, run_cli, train
from harness.data import build_data, validate_data_config
from harness.data.loader import SHARED_DATA_KEYS
from harness.core.errors import ConfigError
from harness.data.base import DataMeta
from harness.data.digits import ShiftedDigits
from harness.data.sampler import BatchStream
from harness.models import build_model, model_spec
from harness.modes.run import run

sklearn = pytest.importorskip("sklearn", reason="data=digits needs the optional vision extra")

DIGITS_META = DataMeta("classification", in_features=64, out_features=10, input_shape=(1, 8, 8))
TINY_RESNET = ["model=resnet", "data=digits", "model.width=8", "model.stages=2", "model.blocks_per_stage=1"]


def eval_rows(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r.get("kind") == "eval"], [r for r in rows if r.get("kind", "train") == "train"]


def test_digits_split_is_fixed_and_shaped():
    train_a, val_a, meta = build_data(validate_data_config(compose_cfg(["data=digits", "model=mlp"]).data))
    train_b, val_b, _ = build_data(validate_data_config(compose_cfg(["data=digits", "model=mlp", "seed=7"]).data))
    assert (len(train_a), len(val_a)) == (1438, 359)
    assert meta.input_shape == (1, 8, 8) and meta.num_classes == 10 and meta.chance_loss == pytest.approx(2.302585)
    x, y = train_a[0]
    assert x.shape == (1, 8, 8) and x.dtype == torch.float32 and y.dtype == torch.long
    assert torch.equal(val_a.x, val_b.x) and torch.equal(val_a.y, val_b.y)  # the run seed never moves the split
    labels = torch.stack([train_a[i][1] for i in range(len(train_a))])
    assert torch.bincount(labels, minlength=10).min() > 100


def test_shift_moves_the_digit_and_fills_with_background():
    image = torch.full((1, 1, 8, 8), -1.0)
    image[0, 0, 3, 4] = 5.0
    data = ShiftedDigits(image, torch.tensor([3]), shift=2, background=-1.0)
    positions = set()
    for seed in range(40):
        torch.manual_seed(seed)
        x, _ = data[0]
        assert x.shape == (1, 8, 8) and (x == 5.0).sum() == 1 and (x == -1.0).sum() == 63
        positions.add(tuple((x[0] == 5.0).nonzero()[0].tolist()))
    assert len(positions) > 10 and all(abs(r - 3) <= 2 and abs(c - 4) <= 2 for r, c in positions)


@pytest.mark.parametrize("norm", ["batch", "group", "layer", "none"])
@pytest.mark.parametrize("residual", [True, False])
def test_resnet_builds_every_variant_and_maps_images_to_logits(norm, residual):
    cfg = compose_cfg(["model=resnet", "data=digits", f"model.norm={norm}", f"model.residual={residual}"]).model
    model = build_model(model_spec(cfg), DIGITS_META)
    out = model(torch.randn(4, 1, 8, 8))
    assert out.shape == (4, 10)
    assert model.n_layer == 6 and sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()) == \
        (13 if norm == "batch" else 0)
    has_shortcut_convs = any(b.shortcut is not None for b in model.blocks)
    assert has_shortcut_convs == residual


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_rnn_maps_tokens_to_next_token_logits(cell):
    cfg = compose_cfg(["model=rnn", f"model.cell={cell}", "model.hidden=16", "model.n_embd=8"]).model
    model = build_model(model_spec(cfg), DataMeta("lm", vocab_size=50, block_size=12))
    idx = torch.randint(0, 50, (3, 12))
    out = model(idx)
    assert out.shape == (3, 12, 50)
    # causal by construction: the first positions' logits ignore later tokens
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 50
    assert torch.allclose(model(changed)[:, :6], out[:, :6])


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_recurrent_gain_sets_every_gates_recurrent_spectral_radius(cell):
    """Orthogonal x gain: every singular value of each gate's hidden-to-hidden block is the gain."""
    overrides = ["model=rnn", f"model.cell={cell}", "model.hidden=16", "model.n_embd=8", "model.n_layer=2"]
    meta = DataMeta("lm", vocab_size=50, block_size=12)
    model = build_model(model_spec(compose_cfg([*overrides, "model.recurrent_gain=2.0"]).model), meta)
    for layer in range(2):
        for block in getattr(model.rnn, f"weight_hh_l{layer}").split(16):
            assert torch.allclose(torch.linalg.svdvals(block), torch.full((16,), 2.0), atol=1e-5)
    default = build_model(model_spec(compose_cfg(overrides).model), meta)  # torch's own uniform init: no fixed radius
    assert not torch.allclose(torch.linalg.svdvals(default.rnn.weight_hh_l0.split(16)[0]), torch.full((16,), 2.0))


def test_a_recurrent_gain_that_is_not_positive_is_one_line(tmp_path):
    line = one_line_error(run_cli(["model=rnn", "model.recurrent_gain=0", "debug=smoke",
                                   f"hydra.run.dir={tmp_path / 'run'}"]), "model.recurrent_gain")
    assert "null or a number > 0" in line and not (tmp_path / "run").exists()


FAMILIES = {"resnet": TINY_RESNET, "rnn": ["model=rnn", "model.hidden=32", "model.n_embd=16", "model.block_size=16"]}
OPTIMIZERS = sorted(p.stem for p in (CONF / "optim").glob("*.yaml") if p.stem != "adamw8bit")  # 8bit: CUDA extra


PRECISIONS = [["precision=fp16", "accum=2"], ["precision=bf16", "accum=4"]]
# The default suite: the optimizers that treat tensors by shape (Muon: matrices; Adafactor: factored
# moments) and both low precisions; -m slow: every optimizer.
QUICK_SETTINGS = [["optim=muon"], ["optim=adafactor"], *PRECISIONS]
ALL_SETTINGS = [[f"optim={name}"] for name in OPTIMIZERS] + PRECISIONS


@pytest.mark.parametrize("family,settings", [(f, QUICK_SETTINGS) for f in FAMILIES] +
                         [pytest.param(f, ALL_SETTINGS, marks=pytest.mark.slow) for f in FAMILIES],
                         ids=[*FAMILIES, *(f"{f}-every-optimizer" for f in FAMILIES)])
def test_family_trains_with_optimizers_precisions_and_accumulation(family, settings, tmp_path):
    for i, extra in enumerate(settings):
        objective, summary = train([*FAMILIES[family], *extra, "debug=smoke", "logger=none", "diagnose=false"],
                                   tmp_path / str(i))
        assert summary["status"] == "completed" and math.isfinite(objective), extra


def test_a_family_on_the_wrong_data_fails_in_one_line_at_the_cli(tmp_path):
    """The in-process catalogue (test_bad_input_catalogue.py) covers the other bad family keys."""
    result = run_cli(["model=resnet", "data=synthetic", f"hydra.run.dir={tmp_path / 'run'}"])
    assert "image data with [channels, height, width] samples" in one_line_error(result, "model")
    assert not (tmp_path / "run").exists()


@pytest.mark.trajectory
def test_resnet_trains_on_digits_and_logs_eval_mode_loss_on_training_samples(tmp_path):
    _, summary = train([*TINY_RESNET, "trainer.max_steps=60", "trainer.log_every=10", "trainer.eval_every=30",
                        "batch_size=32", "optim.lr=3e-3"], tmp_path / "run")
    evals, rows = eval_rows(tmp_path / "run")
    assert summary["status"] == "completed" and summary["best_val_accuracy"] > 0.3  # chance is 0.1
    assert all("val/loss_on_train" in r for r in evals)
    assert "BatchNorm2d" in summary["modules"] and "Conv2d" in summary["modules"]
    assert rows[-1]["train/epoch"] == pytest.approx(60 * 32 / 1438, abs=0.03)
    assert all(r["grad/norm_max"] >= r["grad/norm_preclip"] - 1e-6 for r in rows)
    assert all(r["train/loss_max"] >= r["train/loss"] - 1e-6 for r in rows if "train/loss" in r)


def test_models_without_batch_norm_or_dropout_skip_the_extra_eval(tmp_path):
    train(["model=mlp", "data=digits", "model.width=16", "debug=smoke"], tmp_path / "run")
    evals, _ = eval_rows(tmp_path / "run")
    assert evals and not any("val/loss_on_train" in r for r in evals)


def test_batch_norm_runs_through_epoch_tails_a_micro_batch_of_one_would_break(tmp_path):
    """1438 samples at batch 32 leave a tail of 30; cut into 16 micro-batches, two would hold one
    sample and batch norm would raise in training. The stream skips that tail instead."""
    _, summary = train(["model=mlp", "data=digits", "model.norm=batch", "model.width=16", "batch_size=32",
                        "accum=16", "trainer.max_steps=50", "trainer.eval_every=50"], tmp_path / "run")
    assert summary["status"] == "completed"


def test_the_shared_data_keys_are_the_ones_train_yaml_gives_every_option():
    """A factory (data=custom) gets every key the harness does not read: the shared ones must be known."""
    assert set(SHARED_DATA_KEYS) == set(OmegaConf.load(CONF / "train.yaml").data)


def test_digits_without_scikit_learn_is_one_line_naming_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a))
    with pytest.raises(ConfigError, match=r'data=.digits. is invalid: scikit-learn, from the vision extra: .*\[vision\]'):
        validate_data_config(compose_cfg(["data=digits", "model=mlp"]).data)


def test_stream_skips_tails_below_min_batch_and_keeps_stored_order_without_shuffle():
    stream = BatchStream(10, 4, seed=0, shuffle=False, min_batch=4)
    batches, done = [], []
    for _ in range(4):
        batches.append(stream.next_batch().tolist())
        done.append(stream.epochs_done())
    assert batches == [[0, 1, 2, 3], [4, 5, 6, 7], [0, 1, 2, 3], [4, 5, 6, 7]]  # the tail [8, 9] is skipped
    assert done == pytest.approx([0.4, 1.0, 1.4, 2.0])  # in (e, e + 1] for the epoch e of the last batch
    shuffled = BatchStream(10, 4, seed=0)
    first = shuffled.next_batch().tolist()
    assert first != [0, 1, 2, 3] and len(first) == 4


def test_data_shuffle_false_reads_stored_order_and_resumes_exactly(tmp_path):
    common = ["model=mlp", "data=synthetic", "model.width=16", "data.shuffle=false", "data.n_train=256",
              "trainer.max_steps=20", "trainer.eval_every=10", "trainer.ckpt_every=10", "batch_size=32"]
    full, _ = train(common, tmp_path / "full")
    train([*common, "trainer.stop_after=10"], tmp_path / "half")
    resumed, _ = train([*common, "resume=auto"], tmp_path / "half")
    assert resumed == full


@pytest.mark.trajectory
def test_doctor_passes_on_the_new_families(tmp_path):
    """The shipped sizes: a far smaller LSTM cannot memorise 4 windows in the doctor's 200 updates."""
    for name, overrides in {"resnet": ["model=resnet", "data=digits"], "rnn": ["model=rnn"]}.items():
        run(compose_cfg([*overrides, "mode=doctor"]), tmp_path / name)
        report = json.loads((tmp_path / name / "doctor.json").read_text())
        rows = {row["name"]: row for row in report["checks"]}
        failed = [n for n, row in rows.items() if row["status"] == "FAIL"]
        assert not failed, (name, failed)
        assert rows["initial loss vs ln(K)"]["status"] == "PASS"


@pytest.mark.slow  # two torchrun launches, ~30 s
@pytest.mark.parametrize("family", FAMILIES)
def test_family_trains_under_torchrun(family, tmp_path):
    from test_distributed import run_dirs, torchrun

    torchrun([*FAMILIES[family], "debug=smoke", "batch_size=16", "logger=none"], cwd=tmp_path)
    (run_dir,) = run_dirs(tmp_path)
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"


@pytest.mark.slow  # a 2-trial Optuna grid, ~25 s
def test_family_sweeps_with_the_optuna_sweeper(tmp_path):
    result = run_cli(["-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=grid", *TINY_RESNET[:-3],
                      "model.width=choice(8,16)", "model.stages=2", "debug=smoke", "logger=none",
                      f"hydra.sweep.dir={tmp_path / 'sweep'}"], timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    summaries = [json.loads(p.read_text()) for p in (tmp_path / "sweep").rglob("summary.json")]
    assert len(summaries) == 2 and all(s["status"] == "completed" for s in summaries)
