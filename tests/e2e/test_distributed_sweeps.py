"""Sweeps whose trials are torchrun jobs, and sweep workers sharing one PostgreSQL study."""
from __future__ import annotations

import shutil

import optuna
import pytest

from apps.sweep_helpers import load_study, start_sweep
from conftest import run_cli
from hydra_plugins.harness_optuna_sweeper import _ledger
from pg_server import postgres_bin, postgres_server


@pytest.mark.slow  # ~40 s: four 2-rank torchrun trials; test_single_run_under_torchrun_launcher covers the launcher
def test_optuna_sweep_with_torchrun_trials(tmp_path):
    sweep_dir = tmp_path / "sweep"
    result = run_cli(["-m", "hydra/sweeper=optuna", "hydra/sweeper/sampler=random", "hydra.sweeper.seed=0",
                      "hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=2", "hydra.sweeper.plots=false",
                      "hydra/launcher=torchrun", "hydra.launcher.nproc_per_node=2",
                      "optim.lr=interval(1e-3,1e-2)", "model=mlp", "data=synthetic", "debug=smoke", "diagnose=false",
                      f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    trial_dirs = sorted(p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit())
    assert [p.name for p in trial_dirs] == ["0", "1", "2", "3"]  # one run dir per trial
    for trial_dir in trial_dirs:
        assert (trial_dir / "train_rank1.log").exists()  # a second rank really ran
        assert "--nproc_per_node=2" in (trial_dir / "trial.log").read_text() or (trial_dir / "summary.json").exists()
    trials = load_study(sweep_dir).trials
    assert len(trials) == 4 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert all(t.value is not None and t.value > 0 for t in trials)


@pytest.mark.skipif(postgres_bin() is None or shutil.which("runuser") is None,
                    reason="needs Debian's postgresql package (.ci/run installs it)")
def test_two_workers_share_one_postgres_study(tmp_path):
    with postgres_server() as url:
        common = [f"hydra.sweeper.storage={url}", "hydra.sweeper.study_name=shared", "hydra.sweeper.n_trials=12",
                  "hydra.sweeper.n_jobs=2", "hydra/sweeper/sampler=random", "x=interval(0,1)", "sleep_s=0.3"]
        workers = [start_sweep(tmp_path / f"worker{i}", *common, f"hydra.sweeper.seed={i}") for i in range(2)]
        outputs = [w.communicate(timeout=300)[0] for w in workers]
        assert all(w.returncode == 0 for w in workers), "\n".join(o[-2000:] for o in outputs)
        study = optuna.load_study(study_name="shared", storage=url)
        finished = [t for t in study.trials if _ledger.is_done(t)]
        # two sweepers may ask for the last trial at once: the later one is closed unrun, not run
        surplus = [t for t in study.trials if t.user_attrs.get(_ledger.ATTR_REASON) == _ledger.SURPLUS]
        assert len(finished) == 12 and len(study.trials) == 12 + len(surplus)
        assert all("run_dir" not in t.user_attrs for t in surplus)
        ran_in = {t.user_attrs.get("run_dir", "").split("/worker")[1][0] for t in finished}
        assert ran_in == {"0", "1"}  # both workers contributed
