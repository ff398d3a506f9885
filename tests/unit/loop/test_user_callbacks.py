"""Users' own callbacks (the `callbacks` config node) in real `train.py` runs, from a module in the
working directory: they run, keep state across a resume, stop the run when they ask, and a
callback that raises stops the run with one line and leaves the last checkpoint valid."""
from __future__ import annotations

import json

import pytest
import torch

from conftest import run_cli, one_line_error
from harness.logger.tracking import read_metrics

SMALL = ["model=mlp", "data=synthetic", "model.width=32", "logger=none", "diagnose=false", "trainer.max_steps=30",
         "trainer.log_every=5", "trainer.eval_every=10", "trainer.ckpt_every=10"]

MODULE = '''
from harness.loop.callbacks.base import Callback
from harness.loop.hooks import Stop


class Boom(Callback):
    def __init__(self, at: int):
        self.at = at

    def on_step_end(self, trainer, tick, result):
        if tick.step == self.at:
            raise ValueError("the disk is full")


class CountEvals(Callback):
    """Counts evals across resumes (its state rides in the checkpoint) and logs the count."""
    state_key = "count_evals"

    def __init__(self):
        self.evals = 0

    def on_step_end(self, trainer, tick, result):
        if tick.eval:
            self.evals += 1
            trainer.log_scalars({"custom/evals": float(self.evals)})

    def state_dict(self):
        return {"evals": self.evals}

    def load_state_dict(self, state):
        self.evals = state.get("evals", 0)


class ReturnsTrue(Callback):
    def on_step_end(self, trainer, tick, result):
        return True if tick.step == 15 else None


class StopAt(Callback):
    def __init__(self, at: int):
        self.at = at

    def on_step_end(self, trainer, tick, result):
        return Stop("stopped_by_user") if tick.step == self.at else None

    def summary(self, trainer):
        return {"stopped_by": "StopAt"}
'''


def _train(tmp_path, run: str, *extra: str):
    (tmp_path / "mycb.py").write_text(MODULE)
    return run_cli([*SMALL, f"hydra.run.dir={tmp_path / run}", *extra], cwd=tmp_path)


def test_a_raising_callback_stops_the_run_in_one_line_and_the_last_checkpoint_resumes(tmp_path):
    result = _train(tmp_path, "run", "+callbacks.boom._target_=mycb.Boom", "+callbacks.boom.at=14")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    line, *frames = result.stderr.strip().splitlines()
    assert line.startswith("error: callback 'boom' (mycb.Boom) raised ValueError: the disk is full")
    assert f'File "{tmp_path / "mycb.py"}", line' in frames[0] and "raise ValueError" in "\n".join(frames)
    assert "the disk is full" in (tmp_path / "run" / "train.log").read_text()
    assert "at step 14" in line
    run_dir = tmp_path / "run"
    assert sorted(p.name for p in (run_dir / "checkpoints").glob("step_*.pt"))[-1] == "step_00000010.pt"
    assert not (run_dir / "summary.json").exists()
    resumed = _train(tmp_path, "run", "resume=auto", "~callbacks.boom")  # the callback left out: its saved
    # overrides are dropped with it
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == 30
    straight = _train(tmp_path, "straight")
    assert straight.returncode == 0
    final = [torch.load(d / "checkpoints" / "step_00000030.pt", weights_only=False)["model"]
             for d in (run_dir, tmp_path / "straight")]
    assert all(torch.equal(a, final[1][k]) for k, a in final[0].items())  # the resume was exact


def test_a_callbacks_state_survives_a_resume(tmp_path):
    cb = ["+callbacks.evals._target_=mycb.CountEvals"]
    assert _train(tmp_path, "run", *cb, "trainer.stop_after=20").returncode == 0
    assert _train(tmp_path, "run", *cb, "resume=auto").returncode == 0
    counts = [(r["step"], r["custom/evals"]) for r in read_metrics(tmp_path / "run") if r["kind"] == "custom"]
    assert counts == [(10, 1.0), (20, 2.0), (30, 3.0)]
    saved = torch.load(tmp_path / "run" / "checkpoints" / "step_00000030.pt", weights_only=False)
    assert saved["count_evals"] == {"evals": 3}


def test_a_callback_can_stop_the_run_and_add_to_the_summary(tmp_path):
    result = _train(tmp_path, "run", "+callbacks.stop._target_=mycb.StopAt", "+callbacks.stop.at=12")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "stopped_by_user" and summary["steps"] == 12 and summary["stopped_by"] == "StopAt"
    assert (tmp_path / "run" / "checkpoints" / "step_00000012.pt").is_file()  # saved at the stop


def test_an_entry_set_to_null_is_off(tmp_path):
    result = _train(tmp_path, "run", "+callbacks.boom._target_=mycb.Boom", "+callbacks.boom.at=3", "callbacks.boom=null")
    assert result.returncode == 0, result.stderr[-2000:]


def test_bad_entries_fail_before_training_in_one_line(tmp_path, monkeypatch):
    """Two from the command line (one the config checks refuse, one the build refuses), the rest
    through the same checks in-process: each names its key."""
    for i, (overrides, key) in enumerate([(["+callbacks.boom=5"], "callbacks.boom"),
                                          (["+callbacks.boom._target_=mycb.Boom"], "callbacks.boom._target_")]):
        result = _train(tmp_path, f"run{i}", *overrides)  # the second misses its required argument
        one_line_error(result, key)
        assert not (tmp_path / f"run{i}").exists()
    from omegaconf import OmegaConf

    from harness.core.errors import ConfigError
    from harness.loop.callbacks.user import build_user_callbacks, validate_callbacks_config

    monkeypatch.syspath_prepend(str(tmp_path))  # mycb.py, written by _train
    cases = [({"at": 5}, "callbacks.boom"),
             ({"_target_": "nomodule.Boom"}, "callbacks.boom._target_"),
             ({"_target_": "mycb.Missing"}, "callbacks.boom._target_"),
             ({"_target_": "mycb.Boom", "at": 5, "every": 2}, "callbacks.boom.every"),
             ({"_target_": "json.dumps"}, "callbacks.boom._target_")]  # not a callback
    for entry, key in cases:
        node = OmegaConf.create({"boom": entry})
        with pytest.raises(ConfigError) as refused:
            build_user_callbacks(validate_callbacks_config(node))
        assert refused.value.key == key, (entry, str(refused.value))


def test_a_callback_that_returns_a_value_is_refused_in_one_line_and_the_checkpoints_stay(tmp_path):
    """A stray `True` from on_step_end would end the step's round before the checkpoint: refused."""
    result = _train(tmp_path, "run", "+callbacks.truthy._target_=mycb.ReturnsTrue")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("error: callback 'truthy' (mycb.ReturnsTrue) returned True from on_step_end at "
                                     "step 15: a hook returns None, or Stop(status) from on_step_end to end the run; "
                                     "the run stopped, the checkpoints written before stay valid")
    assert (tmp_path / "run" / "checkpoints" / "step_00000010.pt").is_file()


def test_callbacks_hear_of_each_checkpoint_and_of_the_failure(tmp_path):
    from conftest import train
    from harness.loop.hooks import CallbackError
    from user_code import Watcher

    Watcher.saved.clear(), Watcher.errors.clear()
    train([*SMALL, "+callbacks.w._target_=user_code.Watcher"], tmp_path / "ok")
    assert Watcher.saved == [0, 10, 20, 30] and Watcher.errors == []  # the untrained state is saved too
    with pytest.raises(CallbackError):
        train([*SMALL, "+callbacks.w._target_=user_code.Watcher", "+callbacks.w.fail_at=14"], tmp_path / "failed")
    assert Watcher.errors == ["CallbackError: callback 'w' (user_code.Watcher) raised RuntimeError: a sensor failed "
                              "in on_step_end at step 14; the run stopped, the checkpoints written before stay valid"]
