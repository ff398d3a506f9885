"""The CLI tests' forked `python train.py` is the command a fresh interpreter runs: same exit
status, same output, and nothing importable that a user's process could not import."""
from __future__ import annotations

import pytest

from conftest import run_cli

CASES = [(["optim=adamm"], 2), (["model=mlp", "data=synthetic", "model._target_=user_code.Exploding"], 2),
         (["--cfg", "job", "optim=sgd"], 0)]


@pytest.mark.parametrize("args,status", CASES,
                         ids=["a refused group option", "a module only the test worker can import", "a printed config"])
def test_a_forked_command_says_what_a_fresh_interpreter_says(tmp_path, args, status):
    warm, cold = (run_cli([*args, "debug=smoke", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, cold=c)
                  for c in (False, True))
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert warm.returncode == status and (warm.stderr.startswith("error: ") or status == 0)
    assert not (tmp_path / "run").exists()
