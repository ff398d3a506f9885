"""README's quick start and Sweeps commands run as written (with debug=smoke, a few trials and a
sweep dir of the test's own appended), and so does the obvious short run."""
from __future__ import annotations

import json
import re
import shlex

import pytest

from conftest import ROOT, run_cli

README = (ROOT / "README.md").read_text()
NEEDS_ELSEWHERE = ("storage=postgresql", "hydra/launcher=torchrun")  # a database server / GPUs: tests of their own


def section(title: str) -> str:
    return re.search(rf"^## {re.escape(title)}\n(.*?)^## ", README, re.S | re.M).group(1)


def commands(text: str) -> list[list[str]]:
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" && ")[-1].split("  #")[0].strip()
            if line.startswith("python train.py") and not any(n in line for n in NEEDS_ELSEWHERE):
                found.append(shlex.split(line)[2:])
    return found


QUICK = commands(section("Quick start"))
SWEEPS = commands(section("Sweeps"))


def test_readme_lists_the_commands():
    assert QUICK == [[]] and len(SWEEPS) >= 3


# debug=smoke shrinks the quick start; the 100-step run keeps its length (the default warmup must fit it)
# on a smaller batch, with one eval and one checkpoint.
@pytest.mark.parametrize("args,extra", [(*QUICK, ["debug=smoke"]), (["trainer.max_steps=100"], ["batch_size=8", "logger=none"])],
                         ids=["quick start", "max_steps=100"])
def test_quick_start_and_a_short_run(tmp_path, args, extra):
    result = run_cli([*args, *extra, "diagnose=false", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "completed"


# The first command runs by default; the presets' sweeps (6 grid trials, the baby GPT) cost ~50 s: -m slow.
SWEEP_CASES = [pytest.param(a, marks=[pytest.mark.slow] if i else []) for i, a in enumerate(SWEEPS)]


@pytest.mark.parametrize("args", SWEEP_CASES, ids=[" ".join(a)[:60] for a in SWEEPS])
def test_sweep_commands(tmp_path, args):
    sweep_dir = tmp_path / "sweep"
    result = run_cli([*args, "debug=smoke", "diagnose=false", "logger=none", "hydra.sweeper.n_trials=2",
                      "hydra.sweeper.n_jobs=2", "hydra.sweeper.plots=false", "hydra.sweeper.tensorboard=false",
                      f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["best_trial"] is not None
