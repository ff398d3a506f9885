"""How DataLoader workers start (`data.worker_start`): fork unless other threads could leave a lock behind."""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from conftest import ROOT
from harness.data.loader import fork_hazards, worker_context
from harness.core.errors import ConfigError


class Tensors(torch.utils.data.Dataset):
    def __init__(self, transform=None) -> None:
        self.x, self.transform = torch.randn(64, 4), transform

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.x[i]


@pytest.fixture
def other_thread():
    """A Python thread alive beside the main one (as a tracker's uploader would be)."""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait, name="uploader", daemon=True)
    thread.start()
    yield thread
    stop.set()
    thread.join()


def test_auto_forks_when_nothing_but_torch_runs_threads():
    """In a fresh process: a test worker may still run threads other tests started (trackers')."""
    code = ("import torch; from harness.data.loader import fork_hazards, worker_context; "
            "from test_worker_start import Tensors; "
            "torch.ones(256, 256) @ torch.ones(256, 256); "  # torch's own pools are started: not a hazard
            "print(fork_hazards(), worker_context('auto', Tensors()))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests"), str(Path(__file__).parent)])})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[] None"


def test_auto_starts_workers_from_a_forkserver_beside_other_threads(other_thread):
    assert any(h.startswith("Python threads") and "uploader" in h for h in fork_hazards())
    assert worker_context("auto", Tensors()).get_start_method() == "forkserver"


def test_an_unpicklable_dataset_is_forked_with_one_warning_under_auto(other_thread, caplog):
    dataset = Tensors(transform=lambda x: x)  # a lambda cannot reach a fresh process
    with caplog.at_level(logging.WARNING, logger="harness"):
        contexts = [worker_context("auto", dataset) for _ in range(2)]  # the training and the validation loader
    assert [c.get_start_method() for c in contexts] == ["fork", "fork"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "cannot be pickled" in warnings[0] and "uploader" in warnings[0]


def test_an_explicit_forkserver_refuses_an_unpicklable_dataset_in_one_line():
    with pytest.raises(ConfigError) as err:
        worker_context("forkserver", Tensors(transform=lambda x: x))
    assert err.value.key == "data.worker_start" and "picklable" in str(err.value)
    assert worker_context("spawn", Tensors()).get_start_method() == "spawn"
    assert worker_context("fork", Tensors(transform=lambda x: x)).get_start_method() == "fork"
