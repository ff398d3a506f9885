"""Regenerate a sweep's results (sweep_summary.json, trials.csv/.md, plots, tb_hparams/) from
its Optuna study, e.g. after a resumed sweep, or for a study kept in PostgreSQL.

    python scripts/sweep_report.py multirun/lr_search                   # the sweep dir
    python scripts/sweep_report.py sqlite:///multirun/lr_search/optuna.db --study NAME
    python scripts/sweep_report.py postgresql://user@host/db --study NAME --out reports/lr

With a sweep dir the study's storage is its optuna.db and the results go back into the dir.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.core.errors import ConfigError
from harness.entry.cli import fail


def locate(target: str, study: str | None, out: str | None) -> tuple[str, str, Path]:
    """(storage URL, study name, output dir) from the command line."""
    import optuna

    from hydra_plugins.harness_optuna_sweeper._study import STORAGE_FILE

    if "://" in target:
        url, out_dir = target, Path(out or ".")
    else:
        db = Path(target) / STORAGE_FILE
        if not db.is_file():
            raise ConfigError("SWEEP_DIR", target,
                              f"a sweep dir holding {STORAGE_FILE}, or a storage URL")
        url, out_dir = f"sqlite:///{db.resolve()}", Path(out or target)
    names = optuna.get_all_study_names(url)
    if study is None and len(names) == 1:
        study = names[0]
    if study not in names:
        raise ConfigError("--study", study, f"one of {names}")
    return url, study, out_dir


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", help="sweep dir, or an SQLAlchemy storage URL")
    parser.add_argument("--study", help="study name (needed when the storage holds several)")
    parser.add_argument("--out", help="where to write the results (default: the sweep dir, or .)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--no-tensorboard", action="store_true", help="skip tb_hparams/")
    args = parser.parse_args()

    import optuna

    from harness.loop.callbacks.sweep_trial import open_storage
    from hydra_plugins.harness_optuna_sweeper._report import best_line, write_report

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        url, name, out_dir = locate(args.target, args.study, args.out)
    except ConfigError as err:
        fail(err)
    study = optuna.load_study(study_name=name, storage=open_storage(url))
    summary = write_report(study, out_dir, url, plots=not args.no_plots,
                           tensorboard=not args.no_tensorboard)
    print(f"{name}: {summary['counts']}")
    print(best_line(summary))
    print(f"results in {out_dir}: " + ", ".join(summary["files"].values()))


if __name__ == "__main__":
    main()
