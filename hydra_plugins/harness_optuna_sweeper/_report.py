"""Results of a sweep, from its study alone (so `scripts/sweep_report.py` can redo them):

    sweep_summary.json     best trial (or Pareto front) with its test scores when taken, counts by
                           state, wall time, files
    trials.csv, trials.md  one row per trial: state, values, params, duration, reason
    *.png                  optuna.visualization.matplotlib plots (Agg backend)
    tb_hparams/            every finished trial's hparams + metrics for TensorBoard's HParams tab
"""
from __future__ import annotations

import csv
import json
import math
import shutil
import warnings
from pathlib import Path
from typing import Any, Callable, Optional

import optuna
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from harness.core.validation import is_number
from hydra_plugins.harness_optuna_sweeper._ledger import (
    ATTR_OVERRIDES,
    ATTR_PROCESS,
    ATTR_REASON,
    ATTR_RUN_DIR,
    ATTR_SUMMARY,
    INTERRUPTED,
    STUDY_BEST_TEST,
    STUDY_N_TRIALS,
    STUDY_SEARCH_SPACE,
    is_done,
)

SUMMARY_FILE = "sweep_summary.json"
MIN_TRIALS_FOR_IMPORTANCE = 4
TB_DIR = "tb_hparams"


def display_url(url: str) -> str:
    """The storage URL without its password, fit for logs and files."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:  # not an SQLAlchemy URL: show the scheme only
        return url.split("://", 1)[0] + "://***"


def write_report(study: optuna.Study, out_dir: Path, storage_url: str, plots: bool = True,
                 tensorboard: bool = True) -> dict[str, Any]:
    out_dir.mkdir(parents=True, exist_ok=True)
    trials = study.get_trials(deepcopy=False)
    summary = _summary(study, trials, storage_url)
    rows = _rows(study, trials, summary)
    _write_csv(rows, out_dir / "trials.csv")
    (out_dir / "trials.md").write_text(_markdown(rows))
    files: dict[str, str] = {"table": "trials.csv", "markdown": "trials.md"}
    if plots:
        files.update(_plots(study, trials, out_dir))
    if tensorboard:
        files["tensorboard"] = _tensorboard(study, trials, out_dir)
    summary["files"] = files
    (out_dir / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def value_names(study: optuna.Study, unnamed: str) -> list[str]:
    """What to call each objective value: the study's metric names (the app's `objective`
    fields, set by open_study), else `unnamed`, numbered when there are several."""
    if study.metric_names:
        return list(study.metric_names)
    n = len(study.directions)
    return [unnamed] if n == 1 else [f"{unnamed}_{i}" for i in range(n)]


def best_line(summary: dict[str, Any]) -> str:
    if "pareto_front" in summary:
        return f"Pareto front: trials {[t['number'] for t in summary['pareto_front']]}"
    best = summary.get("best_trial")
    if not best:
        return "no trial completed"
    values = best["values"]
    if summary.get("metric_names"):
        values = ", ".join(f"{name} {value:.6g}" for name, value in zip(summary["metric_names"], values))
    line = f"best trial {best['number']}: {values} with {' '.join(best['overrides'])}"
    test = best.get("test")
    if test:
        scores = ", ".join(f"{key} {value:.6g}" for key, value in test.items()
                           if key.startswith("test_") and key != "test_samples" and is_number(value))
        line += f"; on its {test['test_samples']} test samples: {scores}"
    return line


def _summary(study: optuna.Study, trials: list[FrozenTrial], storage_url: str) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for t in trials:
        counts[t.state.name] = counts.get(t.state.name, 0) + 1
    counts["done"] = sum(map(is_done, trials))
    counts["interrupted"] = sum(t.user_attrs.get(ATTR_REASON) == INTERRUPTED for t in trials)
    spans = [span for span in map(process_span, trials) if span is not None]
    summary: dict[str, Any] = {
        "study_name": study.study_name,
        "storage": display_url(storage_url),
        "directions": [d.name.lower() for d in study.directions],
        "metric_names": study.metric_names,
        "n_trials": study.user_attrs.get(STUDY_N_TRIALS),
        "search_space": study.user_attrs.get(STUDY_SEARCH_SPACE),
        "counts": counts,
        # First trial start to last trial end, over all runs of the sweep.
        "wall_time_s": round(max(e for _, e in spans) - min(s for s, _ in spans), 3) if spans else None,
        "trial_time_s": round(sum(e - s for s, e in spans), 3),
    }
    if len(study.directions) > 1:
        summary["pareto_front"] = [_brief(t) for t in study.best_trials]
    else:
        completed = any(t.state == TrialState.COMPLETE for t in trials)
        summary["best_trial"] = _brief(study.best_trial) if completed else None
        test = study.user_attrs.get(STUDY_BEST_TEST)
        if summary["best_trial"] and isinstance(test, dict) and test.get("trial") == study.best_trial.number:
            summary["best_trial"]["test"] = test
    return summary


def _brief(t: FrozenTrial) -> dict[str, Any]:
    return {
        "number": t.number,
        "values": t.values,
        "params": t.params,
        "overrides": t.user_attrs.get(ATTR_OVERRIDES, []),
        "run_dir": t.user_attrs.get(ATTR_RUN_DIR),
    }


def process_span(t: FrozenTrial) -> Optional[tuple[float, float]]:
    """When the trial's process started and ended (unix time), if it ran to an end."""
    process = t.user_attrs.get(ATTR_PROCESS) or {}
    if "started_at" in process and "ended_at" in process:
        return float(process["started_at"]), float(process["ended_at"])
    return None


def _rows(study: optuna.Study, trials: list[FrozenTrial], summary: dict[str, Any]
          ) -> list[dict[str, Any]]:
    best = summary.get("pareto_front") or [summary.get("best_trial") or {}]
    best_numbers = {b.get("number") for b in best}
    value_cols = value_names(study, "value")
    param_names = sorted({name for t in trials for name in t.params})
    rows = []
    for t in trials:
        row: dict[str, Any] = {"number": t.number, "best": t.number in best_numbers,
                               "state": t.state.name}
        for i, col in enumerate(value_cols):
            row[col] = t.values[i] if t.values else None
        for name in param_names:
            row[name] = t.params.get(name)
        span = process_span(t)
        row["duration_s"] = round(span[1] - span[0], 2) if span else None
        row["reason"] = t.user_attrs.get(ATTR_REASON)
        row["run_dir"] = t.user_attrs.get(ATTR_RUN_DIR)
        rows.append(row)
    return rows


def _write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    if not rows:
        path.write_text("")
        return
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "No trials yet.\n"
    cols = [c for c in rows[0] if c not in ("best", "run_dir")]

    def cell(row: dict[str, Any], col: str) -> str:
        value = row[col]
        text = f"{value:.6g}" if isinstance(value, float) else "" if value is None else str(value)
        if col == "number" and row["best"]:
            text += " (best)"
        return text.replace("|", "\\|")

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(cell(r, c) for c in cols) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _plots(study: optuna.Study, trials: list[FrozenTrial], out_dir: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, and no GUI toolkit in a worker thread
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm

    completed = [t for t in trials if t.state == TrialState.COMPLETE]
    if not completed:
        return {"plots": "skipped: no completed trial"}
    multi = len(study.directions) > 1
    target: Optional[Callable[[FrozenTrial], float]] = (lambda t: t.values[0]) if multi else None
    name = study.metric_names[0] if study.metric_names else "objective 0" if multi else "Objective Value"
    jobs: dict[str, Callable[[], Any]] = {
        "optimization_history.png": lambda: ovm.plot_optimization_history(
            study, target=target, target_name=name),
        "parallel_coordinate.png": lambda: ovm.plot_parallel_coordinate(
            study, target=target, target_name=name),
    }
    if multi and len(study.directions) <= 3:
        jobs["pareto_front.png"] = lambda: ovm.plot_pareto_front(study)
    n_params = len({p for t in completed for p in t.params})
    if n_params >= 2 and len(completed) >= MIN_TRIALS_FOR_IMPORTANCE:
        # The importance evaluator explains *low* target values; flip a maximised objective.
        sign = -1.0 if study.directions[0] == optuna.study.StudyDirection.MAXIMIZE else 1.0
        importance_target = (lambda t: sign * t.values[0]) if multi else None
        jobs["param_importances.png"] = lambda: ovm.plot_param_importances(
            study, target=importance_target, target_name=name)
    if not multi and any(t.intermediate_values for t in trials):
        jobs["intermediate_values.png"] = lambda: ovm.plot_intermediate_values(study)
    files = {}
    for filename, make in jobs.items():
        key = filename.removesuffix(".png")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # experimental-API and evaluator notices
                make()
            fig = plt.gcf()
            fig.savefig(out_dir / filename, dpi=110, bbox_inches="tight")
            files[key] = filename
        except (ValueError, RuntimeError, TypeError) as err:
            # A plot optuna cannot draw for this study must not cost the user the other results.
            files[key] = f"skipped: {err}"
        finally:
            plt.close("all")
    return files


def _tensorboard(study: optuna.Study, trials: list[FrozenTrial], out_dir: Path) -> str:
    from torch.utils.tensorboard import SummaryWriter  # torch is slow to import: only here

    tb_dir = out_dir / TB_DIR
    shutil.rmtree(tb_dir, ignore_errors=True)  # regenerated whole: no duplicate runs
    names = value_names(study, "objective")
    with SummaryWriter(log_dir=str(tb_dir)) as writer:
        for t in trials:
            metrics = _metrics(t, names)
            if not t.state.is_finished() or not metrics:
                continue
            hparams: dict[str, Any] = {k: _hparam(v) for k, v in t.params.items()}
            hparams["state"] = t.state.name
            writer.add_hparams(hparams, metrics, run_name=f"trial_{t.number:04d}")
    return TB_DIR


def _metrics(t: FrozenTrial, names: list[str]) -> dict[str, float]:
    """The objective(s), named by `names`, and every finite number of the trial's summary.json."""
    metrics: dict[str, float] = {}
    if t.values:
        metrics.update(zip(names, map(float, t.values), strict=True))
    for key, value in (t.user_attrs.get(ATTR_SUMMARY) or {}).items():
        if key == "objective" or not is_number(value):
            continue
        if math.isfinite(value):
            metrics[f"summary/{key}"] = float(value)
    return metrics


def _hparam(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else str(value)
