"""A catalogue of bad input, as a new user types it: every case fails in one line naming the key and
the bad value, before any file is written (exit 2 and nothing left behind for the CLI cases)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conftest import compose_cfg, one_line_error, run_cli, train
from harness.core.errors import ConfigError
from harness.modes.run import run

VECTOR = ["model=mlp", "data=synthetic"]

# (overrides, key, text the message must contain); validated by validate_config, in milliseconds.
CONFIG_CASES = [
    # run keys
    (["seed=-1"], "seed", "-1"), (["seed=1.5"], "seed", "1.5"), (["seed=abc"], "seed", "abc"),
    (["seed=99999999999"], "seed", "99999999999"),
    (["device=gpu"], "device", "gpu"), (["device=cuda:7"], "device", "cuda:7"), (["device=tpu"], "device", "tpu"),
    (["batch_size=0"], "batch_size", "0"), (["batch_size=-8"], "batch_size", "-8"), (["batch_size=3.5"], "batch_size", "3.5"),
    (["batch_size=true"], "batch_size", "true"), (["batch_size=30", "accum=4"], "batch_size", "30"),
    (["accum=-1"], "accum", "-1"), (["accum=two"], "accum", "two"),
    (["clip=-0.5"], "clip", "-0.5"), (["clip=inf"], "clip", "inf"), (["clip=nan"], "clip", "nan"), (["clip=big"], "clip", "big"),
    (["clip_mode=l2"], "clip_mode", "l2"), (["clip_mode=null"], "clip_mode", "None"),
    (["compile=maybe"], "compile", "maybe"), (["compile=1"], "compile", "1"),
    (["diagnose=maybe"], "diagnose", "maybe"), (["diagnose=0"], "diagnose", "0"),
    (["overwrite=yes"], "overwrite", "yes"),
    (["resume=/nonexistent/run"], "resume", "/nonexistent/run"),
    (["objective=val_loss"], "objective", "val_loss"), (["objective=[best_val_loss,speed]"], "objective", "speed"),
    (["mode=training"], "mode", "training"), (["mode=null"], "mode", "None"),
    (["accum_reduction=avg"], "accum_reduction", "avg"),
    (["model_output=null"], "model_output", "None"), (["model_output=true"], "model_output", "true"),
    # trainer
    (["trainer.max_steps=0"], "trainer.max_steps", "0"), (["trainer.max_steps=-5"], "trainer.max_steps", "-5"),
    (["trainer.max_steps=1e3"], "trainer.max_steps", "1000.0"), (["trainer.max_steps=many"], "trainer.max_steps", "many"),
    (["trainer.log_every=0"], "trainer.log_every", "0"), (["trainer.eval_every=0"], "trainer.eval_every", "0"),
    (["trainer.eval_batches=0"], "trainer.eval_batches", "0"), (["trainer.ckpt_every=-1"], "trainer.ckpt_every", "-1"),
    (["trainer.keep_last=0"], "trainer.keep_last", "0"), (["trainer.stop_after=0"], "trainer.stop_after", "0"),
    # perf
    (["perf.peak_tflops=-1"], "perf.peak_tflops", "-1"), (["perf.peak_tflops=0"], "perf.peak_tflops", "0"),
    (["perf.peak_tflops=inf"], "perf.peak_tflops", "inf"), (["perf.peak_tflops=nan"], "perf.peak_tflops", "nan"),
    (["perf.peak_tflops=fast"], "perf.peak_tflops", "fast"), (["perf.peak_tflops=true"], "perf.peak_tflops", "true"),
    # optim
    (["optim.lr=0"], "optim.lr", "0"), (["optim.lr=-1e-3"], "optim.lr", "-0.001"), (["optim.lr=inf"], "optim.lr", "inf"),
    (["optim.lr=nan"], "optim.lr", "nan"), (["optim.lr=fast"], "optim.lr", "fast"),
    (["optim.betas=[0.9,1.5]"], "optim.betas", "1.5"), (["optim.betas=[0.9]"], "optim.betas", "0.9"),
    (["optim.eps=-1"], "optim.eps", "-1"), (["optim.weight_decay=-0.1"], "optim.weight_decay", "-0.1"),
    (["optim=sgd", "optim.momentum=-0.5"], "optim.momentum", "-0.5"),
    (["+optim.amsgrad2=true"], "optim.amsgrad2", "true"),
    (["optim=lion", "optim.betas=[2,0.99]"], "optim.betas", "2"),
    (["optim=muon", "optim.ns_steps=0"], "optim.ns_steps", "0"),
    (["optim=muon", "optim.adamw_lr=-1"], "optim.adamw_lr", "-1"),
    # schedule
    (["schedule.warmup=-1"], "schedule.warmup", "-1"), (["schedule.warmup=1.5"], "schedule.warmup", "1.5"),
    (["trainer.max_steps=100", "schedule.warmup=100"], "schedule.warmup", "100"),
    (["schedule.min_lr_ratio=2"], "schedule.min_lr_ratio", "2"), (["schedule.min_lr_ratio=-0.1"], "schedule.min_lr_ratio", "-0.1"),
    (["schedule=poly", "schedule.power=0"], "schedule.power", "0"),
    (["schedule=wsd", "schedule.decay_fraction=0"], "schedule.decay_fraction", "0"),
    (["schedule=wsd", "schedule.decay_shape=exp"], "schedule.decay_shape", "exp"),
    # precision, init, loss, logger, scale_lr
    (["precision=bf16", "device=cuda"], "device", "cuda"),
    (["init=normal", "init.std=0"], "init.std", "0"), (["init=normal", "init.std=-1"], "init.std", "-1"),
    (["loss.label_smoothing=1.0"], "loss.label_smoothing", "1.0"), (["loss.label_smoothing=-0.1"], "loss.label_smoothing", "-0.1"),
    (["loss.z_loss=-1e-4"], "loss.z_loss", "-0.0001"), (["loss.z_loss=nan"], "loss.z_loss", "nan"),
    (["loss.ignore_index=pad"], "loss.ignore_index", "pad"), (["loss.ignore_index=1.5"], "loss.ignore_index", "1.5"),
    (["+logger.comet={}"], "logger.comet", "nothing reads this key"),
    (["scale_lr.base_batch=0"], "scale_lr.base_batch", "0"), (["scale_lr.rule=log"], "scale_lr.rule", "log"),
    # guard, early_stop, monitor, fault
    (["guard.spike_zscore=0"], "guard.spike_zscore", "0"), (["guard.spike_window=0"], "guard.spike_window", "0"),
    (["guard.rollback_lr_factor=0"], "guard.rollback_lr_factor", "0"), (["guard.rollback_lr_factor=1.5"], "guard.rollback_lr_factor", "1.5"),
    (["guard.snapshot_every=0"], "guard.snapshot_every", "0"), (["guard.cut_lr_for_data=maybe"], "guard.cut_lr_for_data", "maybe"),
    (["diagnose={report:false,live:false,ignore:[frozen_paramters]}"], "diagnose.ignore", "frozen_paramters"),
    (["diagnose={report:false,live:false,ignore:frozen_parameters}"], "diagnose.ignore", "frozen_parameters"),
    (["guard.max_rollbacks=-1"], "guard.max_rollbacks", "-1"), (["guard.spike_min_history=1000"], "guard.spike_min_history", "1000"),
    (["early_stop=default", "early_stop.patience=-2"], "early_stop.patience", "-2"),
    (["early_stop=default", "early_stop.min_delta=-1"], "early_stop.min_delta", "-1"),
    (["monitor.every=-3"], "monitor.every", "-3"), (["monitor.level=all"], "monitor.level", "all"),
    (["fault=nan_grad", "fault.at=5"], "fault.at", "5"), (["fault=nan_grad", "fault.at=[-1]"], "fault.at", "-1"),
    (["fault=nan_grad", "fault.at=[a]"], "fault.at", "a"),
    # model
    (["model.n_head=3"], "model.n_embd", "128"), (["model.n_layer=0"], "model.n_layer", "0"),
    (["model.n_layer=four"], "model.n_layer", "four"), (["model.dropout=1.5"], "model.dropout", "1.5"),
    (["model.ln_position=middle"], "model.ln_position", "middle"), (["model.n_embd=-64"], "model.n_embd", "-64"),
    ([*VECTOR, "model.activation=swish"], "model.activation", "swish"), ([*VECTOR, "model.norm=group"], "model.norm", "group"),
    ([*VECTOR, "model.depth=0"], "model.depth", "0"), ([*VECTOR, "model.width=-1"], "model.width", "-1"),
    (["model=mlp"], "model", "harness.models.mlp.MLP"), (["data=synthetic"], "model", "harness.models.gpt.GPT"),
    (["model._target_=nowhere.Net"], "model._target_", "nowhere.Net"), (["model._target_=Net"], "model._target_", "Net"),
    (["model=resnet", "data=digits", "model.norm=instance"], "model.norm", "instance"),
    (["model=resnet", "data=digits", "model.bn_momentum=0"], "model.bn_momentum", "0"),
    (["model=resnet", "data=digits", "model.stages=0"], "model.stages", "0"),
    (["model=resnet"], "model", "harness.models.resnet.ResNet"),
    (["model=resnet", *VECTOR[1:]], "model", "harness.models.resnet.ResNet"),
    (["model=rnn", "model.cell=transformer"], "model.cell", "transformer"),
    (["model=rnn", "model.hidden=0"], "model.hidden", "0"), (["model=rnn", "data=digits"], "model", "RNNLM"),
    # data
    (["data.val_fraction=0"], "data.val_fraction", "0"), (["data.val_fraction=1.2"], "data.val_fraction", "1.2"),
    (["data.block_size=0"], "data.block_size", "0"), (["data.num_workers=-2"], "data.num_workers", "-2"),
    (["data.num_workers=1.5"], "data.num_workers", "1.5"), (["data.pin_memory=sometimes"], "data.pin_memory", "sometimes"),
    (["data.prefetch_factor=-1"], "data.prefetch_factor", "-1"), (["data.collate_fn=nowhere.fn"], "data.collate_fn", "nowhere.fn"),
    (["data=text"], "data.path", "???"), (["data=text", "data.path=/nonexistent.txt"], "data.path", "/nonexistent.txt"),
    (["data=tokens"], "data.dir", "???"), (["data=tokens", "data.dir=/nonexistent"], "data.dir", "/nonexistent"),
    ([*VECTOR, "data.task=ranking"], "data.task", "ranking"), ([*VECTOR, "data.n_train=0"], "data.n_train", "0"),
    ([*VECTOR, "data.num_classes=1"], "data.num_classes", "1"), ([*VECTOR, "data.noise=-1"], "data.noise", "-1"),
    (["data=custom"], "data._target_", "???"),
    (["data.shuffle=sometimes"], "data.shuffle", "sometimes"), (["data.shuffle=1"], "data.shuffle", "1"),
    (["data=digits", "model=mlp", "data.shift=4"], "data.shift", "4"), (["data=digits", "model=mlp", "data.shift=-1"], "data.shift", "-1"),
    (["data=digits", "model=mlp", "data.seed=x"], "data.seed", "x"),
    ([*VECTOR, "data.sort_by_target=yes"], "data.sort_by_target", "yes"),
    ([*VECTOR, "data.test_fraction=-0.1"], "data.test_fraction", "(0, 1)"),
    ([*VECTOR, "data.test_fraction=1"], "data.test_fraction", "(0, 1)"),
    ([*VECTOR, "data.test_fraction=half"], "data.test_fraction", "half"),
    ([*VECTOR, "data.test_fraction=0.8"], "data.test_fraction", "holds out 4096 and leaves 0 to train on"),
    ([*VECTOR, "data.test_fraction=1e-6"], "data.test_fraction", "holds out 0"),
    (["data.test_fraction=0.9"], "data.test_fraction", "(0, 0.9)"),  # stdlib: validation holds 0.1
    (["data.tokenizer=wordpiece"], "data.tokenizer", "wordpiece"),
    (["data.tokenizer=/nonexistent/tokenizer.json"], "data.tokenizer", "/nonexistent/tokenizer.json"),
    (["data.tokenizer=bpe", "data.vocab_size=256"], "data.vocab_size", "256"),
    (["data.tokenizer=bpe", "data.vocab_size=70000"], "data.vocab_size", "70000"),
    (["data.tokenizer=bpe", "data.vocab_size=4k"], "data.vocab_size", "4k"),
    # modes
    (["mode=lr_find", "lr_find.min_lr=0"], "lr_find.min_lr", "0"),
    (["mode=lr_find", "lr_find.max_lr=1e-9"], "lr_find.max_lr", "1e-09"),
    (["mode=lr_find", "lr_find.num_steps=3"], "lr_find.num_steps", "3"),
    (["mode=doctor", "doctor.overfit_steps=0"], "doctor.overfit_steps", "0"),
    # keys nothing reads, added with + (or ++) under the harness's own nodes
    (["+trainer.max_stepz=10"], "trainer.max_stepz", "did you mean trainer.max_steps?"),
    (["++guard.rolback_after=3"], "guard.rolback_after", "did you mean guard.rollback_after?"),
    (["+monitor.levle=full"], "monitor.levle", "did you mean monitor.level?"),
    (["+seeds=3"], "seeds", "did you mean seed?"), (["+loss.zloss=1e-4"], "loss.zloss", "loss.z_loss"),
    (["+diagnose.abort=critical"], "diagnose.abort", "diagnose.abort_on"),
    (["+data.cache=/tmp"], "data.cache", "did you mean data.cache_dir?"),
    ([*VECTOR, "+data.noize=0.2"], "data.noize", "data.noise"),
    # a batch larger than the training set (data=synthetic holds 4096 samples)
    ([*VECTOR, "batch_size=100000"], "batch_size", "at most the 4096 training samples"),
    # your own objective, mode=eval's stride, a run's weights as the init
    ([*VECTOR, "loss._target_=user_code.vae_loss", "loss.label_smoothing=0.1"], "loss.label_smoothing",
     "0 with loss._target_"),
    ([*VECTOR, "loss.function=model", "loss.z_loss=1e-4"], "loss.z_loss", "0 with loss.function=model"),
    ([*VECTOR, "loss._target_=user_code.vae_loss", "loss.function=mse"], "loss.function", "auto with loss._target_"),
    (["data=custom", "data._target_=user_code.pairs", "data.task=null", "model=mlp"], "data.task",
     "null with loss._target_"),
    ([*VECTOR, "loss._target_=user_code.vae_loss", "data.standardize=true"], "data.standardize",
     "false with loss._target_"),
    ([*VECTOR, "objective=final_val_loss_kl"], "objective", "final_val_loss_PART"),
    (["mode=eval", "eval.stride=0"], "eval.stride", "0"),
    (["mode=eval", "eval.other_model=maybe"], "eval.other_model", "maybe"),
    ([*VECTOR, "init=checkpoint", "init.path=/no/such/run"], "init.path", "a .pt checkpoint, or a run dir"),
]


@pytest.mark.parametrize("overrides,key,value", CONFIG_CASES, ids=[" ".join(c[0]) for c in CONFIG_CASES])
def test_config_case(tmp_path, overrides, key, value):
    with pytest.raises(ConfigError) as err:
        run(compose_cfg(["debug=smoke", "logger=none", "diagnose=false", *overrides]), run_dir=tmp_path / "run")
    message = str(err.value)
    assert err.value.key == key and "\n" not in message, message
    assert value in message and " is invalid: " in message, message
    assert not (tmp_path / "run").exists()


def _text(tmp_path, body: bytes | str):
    path = tmp_path / "corpus.txt"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    return ["data=text", f"data.path={path}", "model.block_size=32"]


def _tokens(tmp_path, train: bytes, val: bytes, meta: str | None = '{"vocab_size": 50}'):
    (tmp_path / "train.bin").write_bytes(train)
    (tmp_path / "val.bin").write_bytes(val)
    if meta is not None:
        (tmp_path / "meta.json").write_text(meta)
    return ["data=tokens", f"data.dir={tmp_path}", "model.block_size=32"]


def _tokenizer_file(tmp_path, body: str | None = None, vocab_size: int = 0):
    """A tokenizer.json holding `body`, or a word-level tokenizer of `vocab_size` words."""
    path = tmp_path / "tokenizer.json"
    if body is None:
        from tokenizers import Tokenizer, models

        Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab_size)}, unk_token="w0")).save(str(path))
    else:
        path.write_text(body)
    return [f"data.tokenizer={path}"]


IDS = np.arange(2000, dtype=np.uint16) % 50
FILE_CASES = {
    "empty text": (lambda t: _text(t, ""), "data.path", "block_size+1"),
    "too-short text": (lambda t: _text(t, "hello world\n" * 3), "data.path", "block_size+1"),
    "binary file as text": (lambda t: _text(t, bytes(range(256)) * 40), "data.path", "NUL bytes"),
    "latin-1 file as text": (lambda t: _text(t, "caf\xe9 na\xefve ".encode("latin-1") * 500), "data.path", "not UTF-8"),
    "text too short once BPE-encoded": (lambda t: [*_text(t, "hello world\n" * 40), "data.tokenizer=bpe",
                                                   "data.vocab_size=300"], "data.path", "block_size+1"),
    "tokenizer.json not JSON": (lambda t: _tokenizer_file(t, "{vocab: 50"), "data.tokenizer", "tokenizer.json"),
    "tokenizer.json not a tokenizer": (lambda t: _tokenizer_file(t, '{"vocab": 50}'), "data.tokenizer", "loading it"),
    "tokenizer past uint16": (lambda t: _tokenizer_file(t, vocab_size=70_000), "data.tokenizer", "65536"),
    "odd-sized token file": (lambda t: _tokens(t, IDS.tobytes() + b"x", IDS.tobytes()), "data.dir", "2-byte ids"),
    "empty train.bin": (lambda t: _tokens(t, b"", IDS.tobytes()), "data.dir", "0 bytes"),
    "too few tokens": (lambda t: _tokens(t, IDS[:30].tobytes(), IDS.tobytes()), "data.dir", "block_size+1"),
    "meta.json not JSON": (lambda t: _tokens(t, IDS.tobytes(), IDS.tobytes(), "{vocab_size: 50"), "data.dir", "meta.json"),
    "meta.json without vocab_size": (lambda t: _tokens(t, IDS.tobytes(), IDS.tobytes(), '{"size": 50}'), "data.dir", "meta.json"),
    "no meta.json, no vocab_size": (lambda t: _tokens(t, IDS.tobytes(), IDS.tobytes(), None), "data.vocab_size", "None"),
    "token ids past the vocabulary": (lambda t: _tokens(t, (IDS * 3).tobytes(), IDS.tobytes()), "data.vocab_size", "[0, 147]"),
    "vocab_size past uint16": (lambda t: [*_tokens(t, IDS.tobytes(), IDS.tobytes()), "data.vocab_size=70000"],
                               "data.vocab_size", "65536"),
    "batch norm with one sample per micro-batch": (lambda t: [*VECTOR, "model.norm=batch", "batch_size=2", "accum=2"],
                                                   "batch_size", "batch norm"),
    "checkpoint of another model": (lambda t: _other_checkpoint(t), "resume", "this configuration"),
    "a checkpoint file that is not one": (lambda t: _junk_checkpoint(t), "resume", "readable checkpoint"),
}


def _other_checkpoint(tmp_path):
    from conftest import train

    train([*VECTOR, "model.width=16", "debug=smoke", "logger=none"], tmp_path / "other")
    return [*VECTOR, "model.width=32", f"resume={tmp_path / 'other'}"]


def _junk_checkpoint(tmp_path):
    (tmp_path / "junk.pt").write_text("not a checkpoint")
    return [*VECTOR, f"resume={tmp_path / 'junk.pt'}"]


@pytest.mark.parametrize("case", sorted(FILE_CASES))
def test_bad_file_case(tmp_path, case):
    make, key, fragment = FILE_CASES[case]
    overrides = make(tmp_path)
    with pytest.raises(ConfigError) as err:
        run(compose_cfg(["debug=smoke", "logger=none", "diagnose=false", *overrides]), run_dir=tmp_path / "run")
    message = str(err.value)
    assert err.value.key == key and "\n" not in message and fragment in message, message
    assert not (tmp_path / "run").exists()


# The command line: Hydra's own errors and the run directory, each one line, exit 2, nothing left behind.
CLI_CASES = [
    (["+trainer.max_steps=5"], "trainer.max_steps", "++trainer.max_steps=5"),
    (["model.hidden=64"], "model.hidden", "+model.hidden=64"),
    (["optim.lr=tag(log,interval(1e-4"], "optim.lr", "override syntax"),
    (["optim=adamm"], "optim", "adamw"),
    (["optim.lr=inf"], "optim.lr", "finite"),
    (["fault=nan_grad", "fault.at=5"], "fault.at", "[5]"),
    (["data.tokenizer=wordpiece"], "data.tokenizer", "bpe"),
    (["hydra.run.dir=/proc/forbidden/run"], "hydra.run.dir", "can be created"),
    (["trainer.max_stepz=5"], "trainer.max_stepz", "did you mean trainer.max_steps?"),
    (["+trainer.max_stepz=10"], "trainer.max_stepz", "did you mean trainer.max_steps?"),
    (["schedule=constant", "+schedule.decay_fraction=0.2"], "schedule.decay_fraction", "--cfg job -p schedule"),
    (["--cfg", "bogus"], "command line", "invalid choice: 'bogus'"),
    (["--bogus-flag"], "command line", "unrecognized arguments: --bogus-flag"),
    (["-m", "--cfg", "job", "seed=1,2"], "command line", "--multirun and --cfg together"),
    (["--info", "config", "seed=1", "--cfg", "job"], "command line", "--cfg and --info together"),
    (["--run", "--cfg", "job"], "command line", "--run and --cfg together"),
    (["--shell-completion"], "command line", "e.g. -sc install=bash"),
    (["--experimental-rerun", "/nonexistent/config.pickle"], "command line", "no such file"),
    (["--cfg", "job", "optim=adamm"], "optim", "adamw"),
    ([*VECTOR, "batch_size=5000"], "batch_size", "at most the 4096 training samples"),
    ([*VECTOR, "data.test_fraction=0.8"], "data.test_fraction", "leaves 0 to train on"),
    (["+experiment=baby_gpt"], "+experiment", "choose it with experiment=baby_gpt (no +)"),
    (["optimizer=sgd"], "optimizer", "did you mean optim?"),
]


@pytest.mark.parametrize("args,key,fragment", CLI_CASES, ids=[" ".join(c[0]) for c in CLI_CASES])
def test_cli_case(tmp_path, args, key, fragment):
    run_dir = tmp_path / "run"
    if not any(a.startswith("hydra.run.dir=") for a in args):
        args = [*args, f"hydra.run.dir={run_dir}"]
    line = one_line_error(run_cli([*args, "debug=smoke"], cwd=tmp_path), key)
    assert fragment in line, line
    assert not run_dir.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no outputs/ either


def test_cli_sweep_expression_that_does_not_parse(tmp_path):
    result = run_cli(["-m", "optim.lr=choice(1e-3,", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path)
    one_line_error(result, "optim.lr")
    assert not (tmp_path / "sweep").exists()



# Good input: Hydra's own flags, in both forms and in any position among the overrides. Each prints
# and exits 0 without training or creating a run directory.
GOOD_CLI_CASES = [
    (["--cfg", "job"], "max_steps: 1000"), (["--cfg=job"], "max_steps: 1000"), (["-c", "job"], "max_steps: 1000"),
    (["trainer.max_steps=7", "--cfg", "job"], "max_steps: 7"), (["--cfg", "job", "trainer.max_steps=7"], "max_steps: 7"),
    (["optim=sgd", "--cfg", "job", "trainer.max_steps=7", "--resolve"], "momentum: 0.9"),
    (["--cfg", "job", "--resolve", "data=synthetic"], "n_train: 4096"),
    (["--cfg", "job", "-p", "trainer"], "# @package trainer"), (["--package=trainer", "--cfg=job"], "# @package trainer"),
    (["--cfg", "hydra"], "hydra:"), (["--cfg", "all", "seed=3"], "seed: 3"),
    (["--info", "defaults"], "Defaults List"), (["--info=defaults-tree"], "Defaults Tree"),
    (["--info", "config"], "Config"), (["--info", "searchpath"], "Config search path"),
    (["--info", "plugins"], "Installed Hydra Plugins"), (["--info"], "Installed Hydra Plugins"),
    (["--info", "all", "optim=sgd"], "Defaults List"),
    (["-cn", "train", "--cfg", "job"], "max_steps: 1000"), (["--config-name=train", "--cfg", "job"], "max_steps: 1000"),
    (["--config-name", "train", "trainer.max_steps=9", "--cfg", "job"], "max_steps: 9"),
    (["-cp", "conf", "--cfg", "job", "-p", "trainer"], "max_steps: 1000"),
    (["--config-path=conf", "--cfg=job"], "max_steps: 1000"),
    (["--hydra-help"], "Hydra"), (["--help"], "train.py"), (["--version"], "Hydra"),
    (["hydra.verbose=true", "--cfg", "job"], "max_steps: 1000"),
    (["-sc", "install=bash"], "hydra_bash_completion"), (["--shell-completion", "install=bash"], "complete"),
]


@pytest.mark.parametrize("args,expected", GOOD_CLI_CASES, ids=[" ".join(c[0]) for c in GOOD_CLI_CASES])
def test_hydra_flags_are_accepted_in_any_form_and_position(tmp_path, args, expected):
    result = run_cli(args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert expected in result.stdout + result.stderr
    assert "error:" not in result.stderr
    assert [p.name for p in tmp_path.iterdir()] == []  # printed only: no outputs/, no run dir


def test_config_groups_from_a_config_dir_are_options(tmp_path):
    """-cd / --config-dir / hydra.searchpath add options of the user's own, with keys of their own."""
    (tmp_path / "mine" / "schedule").mkdir(parents=True)
    (tmp_path / "mine" / "schedule" / "steps.yaml").write_text("name: constant\nwarmup: 0\nmy_note: kept\n")
    for flag in (["-cd", str(tmp_path / "mine")], [f"--config-dir={tmp_path / 'mine'}"],
                 [f"hydra.searchpath=[file://{tmp_path / 'mine'}]"]):
        result = run_cli([*flag, "schedule=steps", "--cfg", "job", "-p", "schedule"], cwd=tmp_path)
        assert result.returncode == 0 and "my_note: kept" in result.stdout, result.stderr[-2000:]
    run_dir = tmp_path / "run"
    result = run_cli(["-cd", str(tmp_path / "mine"), "schedule=steps", *VECTOR, "debug=smoke", "logger=none",
                      "diagnose=false", f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert '"status": "completed"' in (run_dir / "summary.json").read_text()


def test_every_shipped_preset_defines_only_keys_the_harness_reads():
    """With Hydra's real choices (the CLI's precise check), every experiment and pathology preset passes."""
    from hydra import compose, initialize_config_dir

    from conftest import CONF
    from harness.core.config_keys import check_known_keys

    presets = sorted(p.relative_to(CONF / "experiment").with_suffix("").as_posix()
                     for p in (CONF / "experiment").rglob("*.yaml"))
    assert len(presets) > 10
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for preset in presets:
            cfg = compose(config_name="train", overrides=[f"experiment={preset}"], return_hydra_config=True)
            check_known_keys(cfg, dict(cfg.hydra.runtime.choices))


def test_user_owned_nodes_take_new_keys(tmp_path):
    """vars, a data=custom factory's node and a user model's node keep accepting keys of their own."""
    _, summary = train_cli(tmp_path, ["+vars.width=16", *VECTOR, "model.width=${vars.width}"])
    assert summary["status"] == "completed"


def train_cli(tmp_path, args):
    run_dir = tmp_path / "run"
    result = run_cli([*args, "debug=smoke", "logger=none", "diagnose=false", f"hydra.run.dir={run_dir}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    return result, json.loads((run_dir / "summary.json").read_text())


def test_resume_auto_on_a_completed_run_leaves_it_untouched(tmp_path):
    first, _ = train_cli(tmp_path, [*VECTOR])
    assert re.search(r"completed after 6 steps: best val loss \d+\.\d{4} ->", first.stdout), first.stdout[-500:]
    names = ("summary.json", "config.yaml", "train.log", "metrics.jsonl")
    before = {n: ((tmp_path / "run" / n).read_bytes(), (tmp_path / "run" / n).stat().st_mtime_ns) for n in names}
    again, _ = train_cli(tmp_path, [*VECTOR, "resume=auto"])
    assert "is complete (step 6 of trainer.max_steps=6); nothing was changed" in again.stdout
    assert len(again.stdout.strip().splitlines()) == 1 and "error" not in again.stderr
    assert {n: ((tmp_path / "run" / n).read_bytes(), (tmp_path / "run" / n).stat().st_mtime_ns) for n in names} == before


def test_a_finished_constant_schedule_run_trains_further_with_a_larger_max_steps(tmp_path):
    common = [*VECTOR, "schedule=constant", "schedule.warmup=2", "trainer.eval_every=3"]
    _, first = train_cli(tmp_path, common)
    _, extended = train_cli(tmp_path, [*common, "resume=auto", "trainer.max_steps=12"])
    assert first["steps"] == 6 and extended["steps"] == 12 and extended["status"] == "completed"
    steps = [json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(steps) and max(steps) == 12  # continued where it stopped, no step logged twice
    whole, _ = train(["debug=smoke", "logger=none", *common, "trainer.max_steps=12"], tmp_path / "whole")
    assert extended["best_val_loss"] == pytest.approx(whole, rel=1e-6)  # as if it had been planned at 12 steps


def test_a_decayed_schedule_is_not_restarted_by_a_larger_max_steps(tmp_path):
    train(["debug=smoke", "logger=none", *VECTOR], tmp_path / "run")  # cosine to its floor at step 6
    before = (tmp_path / "run" / "summary.json").read_bytes()
    with pytest.raises(ConfigError) as err:
        run(compose_cfg(["debug=smoke", "logger=none", "diagnose=false", *VECTOR, "resume=auto",
                         "trainer.max_steps=12"]), run_dir=tmp_path / "run")
    assert err.value.key == "trainer.max_steps" and "schedule=cosine was at 0.1x" in str(err.value)
    assert (tmp_path / "run" / "summary.json").read_bytes() == before
    with pytest.raises(ConfigError, match=r"resume=.* is invalid: a checkpoint before trainer.max_steps=6"):
        run(compose_cfg(["debug=smoke", "logger=none", "diagnose=false", *VECTOR, f"resume={tmp_path / 'run'}"]),
            run_dir=tmp_path / "other")
    assert not (tmp_path / "other").exists()
