"""RUN_DIR/summary.json and report.md after the remedies: the result attempt's, with the story."""
from __future__ import annotations

import json
from pathlib import Path

from harness.diagnosis.report import PLOTS_PENDING
from harness.remedy.story import CODE_CHANGE, FURTHER, MIDPOINT, Attempt, Story, attempt_dir
from harness.state.files import atomic_json_dump

SEARCH_NOTE = {FURTHER: " (LR search: the kept factor again)", MIDPOINT: " (LR search: the midpoint of an overshoot)"}


def write_top(run_dir: Path, story: Story) -> None:
    """RUN_DIR/summary.json: the best attempt's, with the story; RUN_DIR/report.md: the story, then
    the best attempt's report."""
    best = attempt_dir(run_dir, story.best_attempt)
    summary = json.loads((best / "summary.json").read_text())
    told = story.to_json()
    summary.update(remedy_verdict=story.verdict, best_attempt=story.best_attempt, attempts=told["attempts"],
                   remedies_refused=told.get("refused", []))
    atomic_json_dump(summary, run_dir / "summary.json")
    lines = [f"# Remedies: {story.verdict}", "",
             f"The run's result is attempt {story.best_attempt}'s: the lowest best val loss among the run as "
             f"given and the remedies kept (a rejected remedy is never the result, however low it ended: it did not "
             f"beat its base where both had trained).", "",
             "| attempt | builds on | remedy applied | started | ended | steps | best val loss | outcome "
             "| critical findings |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(a) for a in story.attempts]
    first = story.attempts[0]
    if story.verdict == CODE_CHANGE and first.code:
        lines.append(f"\nNothing was tried: the run as given has a cause in your own code, at {', '.join(first.code)}, "
                     f"that no config override reaches. Its finding below quotes the line and the edit.")
    for refusal in story.refused:
        lines.append(f"\nNot tried, refused by the config checks: `{' '.join(refusal.overrides)}` for "
                     f"{refusal.finding} ({refusal.why}).")
    report = best / "report.md"
    body = report.read_text() if report.is_file() else ""
    body = body.replace(PLOTS_PENDING, f"The best attempt's plots are drawn into `attempts/{best.name}/plots/`; "
                                       f"[its report](attempts/{best.name}/report.md) lists them when done.")
    (run_dir / "report.md").write_text("\n".join(lines) + "\n\n" + body.replace("](plots/",
                                                                                f"](attempts/{best.name}/plots/"))


def _row(a: Attempt) -> str:
    best_loss = "—" if a.best_val_loss is None else f"{a.best_val_loss:.4g}"
    if a.applied is not None:
        remedy = (f"`{' '.join(a.applied.overrides)}`{SEARCH_NOTE.get(a.applied.search, '')} for "
                  f"{a.applied.finding}" + (" (changes the model)" if a.applied.changes_model else ""))
    else:
        remedy = f"none: attempt {a.finishes} to its end" if a.finishes else "(as given)"
    return (f"| [{a.number}](attempts/{a.number}/report.md) | {a.base or '—'} | {remedy} | {a.restart} | "
            f"{a.status or '?'} | {a.steps if a.steps is not None else '?'} | {best_loss} | {a.outcome or '—'} | "
            f"{', '.join(a.critical or []) or 'none'} |")
