"""Files a run writes atomically (summary.json, checkpoints, attempts.json) take the process umask,
as every other file of the run does: a teammate in the group can read them."""
from __future__ import annotations

import os
import stat
import subprocess
import sys

from conftest import ROOT


def test_atomic_writes_follow_the_umask(tmp_path):
    script = ("import os, sys; from pathlib import Path; from harness.state.files import atomic_json_dump; "
              "os.umask(int(sys.argv[2], 8)); atomic_json_dump({'a': 1}, Path(sys.argv[1]))")
    for umask, mode in (("022", 0o644), ("077", 0o600), ("002", 0o664)):
        path = tmp_path / f"summary_{umask}.json"
        done = subprocess.run([sys.executable, "-c", script, str(path), umask], cwd=ROOT, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr
        assert stat.S_IMODE(path.stat().st_mode) == mode, umask


def test_a_runs_summary_and_checkpoints_are_readable_by_the_group_under_umask_022(tmp_path):
    done = subprocess.run(["bash", "-c", f"umask 022 && {sys.executable} train.py debug=smoke logger=none "
                           f"hydra.run.dir={tmp_path / 'run'}"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    written = [tmp_path / "run" / "summary.json", *(tmp_path / "run" / "checkpoints").glob("*.pt")]
    assert len(written) >= 2 and all(stat.S_IMODE(p.stat().st_mode) == 0o644 for p in written)
