"""After the sweep: the best trial's best checkpoint scored on the test split its data holds out,
by the app's own `mode=eval` in the trial's run dir (which reuses the trial's overrides), so the
sweep reports a number nothing was selected on. Kept as the study's STUDY_BEST_TEST user attr,
naming its trial: a rerun that extends the study scores its new best trial, and keeps the scores
of an unchanged one."""
from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path
from typing import Any, Optional

import optuna
from optuna.trial import TrialState
from hydra.core.override_parser.types import Quote, QuotedString

from hydra_plugins.harness_optuna_sweeper._ledger import ATTR_SUMMARY, STUDY_BEST_TEST
from hydra_plugins.harness_optuna_sweeper._loop import trial_dir
from harness.launch.runner import AppCommand

log = logging.getLogger(__name__)
EVAL_FILE = "eval.json"
KEPT = ("checkpoint", "step", "test_samples")  # of eval.json, besides its test scores
TEST_PREFIX = "test_"


def score_best_trial(study: optuna.Study, app: AppCommand, sweep_dir: Path) -> Optional[dict[str, Any]]:
    """The best trial's test scores (computed now, or kept from an earlier run of the sweep);
    None when there is no single best trial, its run held no test split, or the eval failed."""
    if len(study.directions) > 1 or not any(t.state == TrialState.COMPLETE for t in study.get_trials(deepcopy=False)):
        return None
    best = study.best_trial
    if not (best.user_attrs.get(ATTR_SUMMARY) or {}).get("test_samples"):  # its data holds no test split
        return None
    kept = study.user_attrs.get(STUDY_BEST_TEST)
    if isinstance(kept, dict) and kept.get("trial") == best.number:
        return kept
    run_dir = trial_dir(sweep_dir, best)
    log.info("[trial %d] best: scoring its best checkpoint on the test split (mode=eval)", best.number)
    quoted = QuotedString(text=str(run_dir), quote=Quote.single).with_quotes()
    proc = subprocess.run([app.python, *app.entry, *app.args, "mode=eval", f"hydra.run.dir={quoted}"],
                          cwd=app.cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    report = _read(run_dir / EVAL_FILE) if proc.returncode == 0 else None
    if report is None:
        why = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[-1]
        log.warning("[trial %d] test eval failed (exit code %d): %s", best.number, proc.returncode, why)
        return None
    scores = {"trial": best.number, **{key: value for key, value in report.items()
                                       if key in KEPT or key.startswith(TEST_PREFIX)}}  # every test metric
    study.set_user_attr(STUDY_BEST_TEST, scores)
    return scores


def _read(path: Path) -> Optional[dict[str, Any]]:
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and report.get("test_samples") else None
