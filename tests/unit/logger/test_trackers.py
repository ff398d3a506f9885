"""MLflow and W&B as metric sinks, with the real libraries: a run and a sweep written to a SQLite
MLflow store and read back with MlflowClient; a resume after kill -9 logs no step twice; W&B
offline keeps the history in the run dir; a tracker that fails stops nothing."""
from __future__ import annotations

import json
import os
import struct

import pytest

from conftest import ROOT, run_cli
from harness.logger.tracking import read_metrics

SMALL = ["model=mlp", "data=synthetic", "model.width=32", "diagnose.report=false", "trainer.max_steps=40",
         "trainer.log_every=5", "trainer.eval_every=20", "trainer.ckpt_every=10"]
KILLER = '''
import os, signal
from harness.loop.callbacks.base import Callback


class KillAt(Callback):
    def __init__(self, at: int):
        self.at = at

    def on_step_end(self, trainer, tick, result):
        if tick.step == self.at:
            os.kill(os.getpid(), signal.SIGKILL)
'''


def _mlflow():
    """mlflow, imported by the tests that use it: it costs every test worker two seconds at collection."""
    return pytest.importorskip("mlflow", reason="the mlflow extra is not installed")


def _client(tmp_path):
    return _mlflow().MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")


def _history(client, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_a_run_is_filed_in_mlflow_with_params_metrics_artifacts_and_status(tmp_path):
    _mlflow()
    result = run_cli([*SMALL, "logger=[tensorboard,mlflow]", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    client = _client(tmp_path)
    (run,) = client.search_runs([client.get_experiment_by_name("train").experiment_id])
    assert run.info.run_name == "run" and run.info.status == "FINISHED" and run.data.tags["status"] == "completed"
    assert run.data.params["optim.lr"] == _config_value(tmp_path / "run", "optim", "lr")
    assert run.data.params["trainer.max_steps"] == "40" and run.data.tags["seed"] == "1337"
    rows = read_metrics(tmp_path / "run")
    expected = [(r["step"], r["train/loss"]) for r in rows if "train/loss" in r]
    assert _history(client, run.info.run_id, "train/loss") == expected
    assert [s for s, _ in _history(client, run.info.run_id, "val/loss")] == [20, 40]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} >= {"config.yaml", "summary.json"}
    assert (tmp_path / "run" / "tb").is_dir()  # the other tracker wrote too


def _config_value(run_dir, *keys):
    import yaml

    node = yaml.safe_load((run_dir / "config.yaml").read_text())
    for key in keys:
        node = node[key]
    return str(node)


@pytest.mark.slow  # ~17 s; kill -9 resumes are bitwise-checked in test_faults and test_fsdp by default
def test_a_resume_after_kill_9_logs_no_step_twice(tmp_path):
    _mlflow()
    (tmp_path / "killer.py").write_text(KILLER)
    common = [*SMALL, "logger=mlflow", f"hydra.run.dir={tmp_path / 'run'}"]
    killed = run_cli([*common, "+callbacks.kill._target_=killer.KillAt", "+callbacks.kill.at=27"], cwd=tmp_path)
    assert killed.returncode == -9
    resumed = run_cli([*common, "resume=auto", "~callbacks.kill"], cwd=tmp_path)  # not the saved killer again
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    straight = run_cli([*SMALL, "logger=mlflow", f"hydra.run.dir={tmp_path / 'straight'}"], cwd=tmp_path)
    assert straight.returncode == 0
    client = _client(tmp_path)
    runs = {r.info.run_name: r for r in client.search_runs([client.get_experiment_by_name("train").experiment_id])}
    assert set(runs) == {"run", "straight"} and runs["run"].info.status == "FINISHED"  # one MLflow run, continued
    for key in ("train/loss", "grad/norm_preclip", "val/loss"):
        history = _history(client, runs["run"].info.run_id, key)
        steps = [s for s, _ in history]
        assert len(steps) == len(set(steps)), f"{key} logged a step twice: {steps}"
        assert history == _history(client, runs["straight"].info.run_id, key)  # and exactly


@pytest.mark.slow  # a whole sweep into MLflow
def test_sweep_trials_are_children_of_one_parent_run(tmp_path):
    _mlflow()
    sweep = tmp_path / "sweep"
    result = run_cli(["-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=3", "hydra.sweeper.n_jobs=2",
                      "optim.lr=interval(1e-3,1e-2)", *SMALL, "trainer.max_steps=10", "trainer.eval_every=5",
                      "logger=mlflow", f"hydra.sweep.dir={sweep}"], cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    client = _client(tmp_path)
    experiments = [e for e in client.search_experiments() if e.name not in ("Default", "train")]
    (experiment,) = experiments
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    assert {r.data.tags["mlflow.parentRunId"] for r in children} == {parents[0].info.run_id}
    assert sorted(r.data.tags["trial"] for r in children) == ["0", "1", "2"]
    assert all(r.info.status == "FINISHED" and r.data.params["optim.lr"] for r in children)


def test_a_tracker_that_fails_stops_nothing(tmp_path):
    _mlflow()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the store's folder should be")
    result = run_cli([*SMALL, "logger=[tensorboard,mlflow]", f"logger.mlflow.tracking_uri=sqlite:///{blocked}/sub/m.db",
                      f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if "logger mlflow failed" in line]
    assert len(warnings) == 1
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "completed"
    assert list((tmp_path / "run" / "tb").glob("events.out.tfevents.*"))  # the other tracker kept writing
    assert [r["step"] for r in read_metrics(tmp_path / "run") if r["kind"] == "train"] == [5, 10, 15, 20, 25, 30,
                                                                                           35, 40]


def test_wandb_offline_keeps_the_history_in_the_run_dir(tmp_path):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    result = run_cli([*SMALL, "logger=wandb", "logger.wandb.mode=offline", f"hydra.run.dir={tmp_path / 'run'}"],
                     cwd=tmp_path, env={**env, "WANDB_SILENT": "true", "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr[-2000:]
    (offline,) = (tmp_path / "run" / "wandb").glob("offline-run-*")
    (records,) = offline.glob("run-*.wandb")
    history = _wandb_history(records)
    expected = [(r["step"], r["train/loss"]) for r in read_metrics(tmp_path / "run") if "train/loss" in r]
    assert [(s, v) for s, v in history if v is not None] == expected


@pytest.mark.slow  # ~16 s; MLflow's sweep test covers the parent/child filing in the default suite
def test_wandb_files_a_sweeps_trials_in_one_group(tmp_path):
    pytest.importorskip("wandb", reason="the wandb extra is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    result = run_cli(["-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2", "optim.lr=interval(1e-3,1e-2)",
                      *SMALL, "trainer.max_steps=10", "trainer.eval_every=5", "logger=wandb",
                      "logger.wandb.mode=offline", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path,
                     env={**env, "WANDB_SILENT": "true"}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    logs = sorted((tmp_path / "sweep").glob("*/wandb/offline-run-*/run-*.wandb"))
    groups = [_wandb_records(log, "run")[0].run_group for log in logs]
    assert len(groups) == 2 and len(set(groups)) == 1 and groups[0].startswith("train over optim.lr [")


def _wandb_history(path) -> list[tuple[int, float | None]]:
    """(step, train/loss) of each history record in an offline run's transaction log."""
    found = []
    for history in _wandb_records(path, "history"):
        items = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in history.item}
        found.append((items.get("_step"), items.get("train/loss")))
    return found


def _wandb_records(path, kind: str) -> list:
    """The `kind` records of an offline run's transaction log: a 7-byte header, then LevelDB-log
    blocks of 32 KiB whose records (7-byte headers: crc, length, type) hold protobuf `Record`s,
    split across blocks when long."""
    from wandb.proto import wandb_internal_pb2

    data, block, pos, pending, found = path.read_bytes(), 32768, 7, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _crc, length, piece = struct.unpack("<IHB", data[pos:pos + 7])
        pending, pos = pending + data[pos + 7:pos + 7 + length], pos + 7 + length
        if piece in (1, 4) and pending:  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            pending = b""
            if record.WhichOneof("record_type") == kind:
                found.append(getattr(record, kind))
    return found
