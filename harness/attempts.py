"""`diagnose.remedy=auto`: a run that the diagnosis calls sick starts again with the fix its finding
names, within `diagnose.max_attempts` remedies, and says what it did.

Each attempt is a complete run dir, RUN_DIR/attempts/N/ (config, metrics, checkpoints, report).
An attempt ends when a critical finding that carries a remedy appears (live, at an eval: the
attempt runs with `diagnose.abort_on=remedy`) or when it finishes. Then the next attempt starts
with the remedy's overrides on top of the earlier ones:
- from a copy of the last checkpoint before the symptom (LR, clip, precision, accumulation);
- from scratch (init, activation, architecture, schedule shape), or when no checkpoint qualifies.

A remedy is never applied twice, and the run stops as `sick` once `max_attempts` remedies did not
heal it. RUN_DIR/attempts.json keeps the story, written before each attempt starts, so
`resume=auto` after a kill continues the attempt that was running, exactly. RUN_DIR/summary.json
(the last attempt's, plus the story) and RUN_DIR/report.md tell it; the objective a sweep gets is
the last attempt's.
"""
from __future__ import annotations

import copy
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Callable

import yaml
from omegaconf import DictConfig, OmegaConf

from harness.checkpoint import atomic_json_dump, load_checkpoint, step_checkpoints, step_of
from harness.config import validate_config
from harness.config_keys import CONF_DIR
from harness.diagnosis import diagnose, load_run
from harness.diagnosis.findings import Finding, Remedy, Restart, Severity
from harness.diagnosis.live import diagnose_settings
from harness.distributed import DistInfo, barrier, broadcast_object
from harness.errors import ConfigError
from harness.rundir import BEST_LINK, CKPT_DIR, stored_objective

log = logging.getLogger("harness")
STORY = "attempts.json"
ATTEMPTS = "attempts"

TrainOne = Callable[[DictConfig, Path], Any]  # trains one attempt's config in its run dir; returns the objective


def run_attempts(cfg: DictConfig, run_dir: Path, train_one: TrainOne, dist: DistInfo = DistInfo()) -> Any:
    """Train attempt after attempt until one ends without a critical finding to remedy. Under
    torchrun every rank trains each attempt; rank 0 judges it and writes the story, and every
    rank follows its verdict."""
    settings = diagnose_settings(cfg.diagnose)
    story = _load_story(run_dir) if cfg.resume == "auto" else None
    if story is None:
        story = {"max_attempts": settings.max_attempts, "attempts": [_attempt(1, [], "as given", None)], "verdict": None}
    elif story["verdict"] is not None:
        log.info("%s: the remedies are done (%s); nothing was changed", run_dir, story["verdict"])
        return stored_objective(run_dir / ATTEMPTS / str(len(story["attempts"])))
    while story["verdict"] is None:
        attempt = story["attempts"][-1]
        attempt_dir = run_dir / ATTEMPTS / str(attempt["number"])
        if dist.is_main:
            _save(run_dir, story)  # before it starts: a kill from here on resumes this attempt
        objective = train_one(attempt_config(cfg, attempt, attempt_dir, dist), attempt_dir)
        barrier(dist)  # rank 0's summary.json and metrics are complete
        if dist.is_main:
            _judge(cfg, story, attempt_dir, dist.world_size)
        story = broadcast_object(story, dist)
    if dist.is_main:
        _save(run_dir, story)
        _write_top(run_dir, story)
    barrier(dist)
    return objective


def _judge(cfg: DictConfig, story: dict[str, Any], attempt_dir: Path, world_size: int) -> None:
    """The diagnosis of the attempt that just ended: the story gets its verdict, or the next attempt."""
    attempt = story["attempts"][-1]
    findings = diagnose(load_run(attempt_dir))
    summary = json.loads((attempt_dir / "summary.json").read_text())
    attempt.update(status=summary["status"], steps=summary["steps"], best_val_loss=summary["best_val_loss"],
                   final_train_loss=summary["final_train_loss"],
                   critical=[f.name for f in findings if f.severity is Severity.CRITICAL])
    applied = [a["remedy"]["overrides"] for a in story["attempts"] if a.get("remedy")]
    sick = next((f for f in findings if f.severity is Severity.CRITICAL and f.remedy
                 and list(f.remedy.overrides) not in applied), None)
    if sick is None:
        story["verdict"] = "sick" if attempt["critical"] else ("healed" if applied else "healthy")
        return
    attempt.update(finding=sick.name, remedy=_remedy_record(sick.remedy))
    if len(applied) >= story["max_attempts"]:
        story["verdict"] = "sick"
        log.warning("remedy: %s after %d remedies; the run stops as sick", sick.name, len(applied))
        return
    following = _next_attempt(attempt, sick, attempt_dir)
    refused = _refused(cfg, following["overrides"], world_size)
    if refused is not None:  # e.g. a key the user's own model does not take
        attempt["remedy"]["refused"] = refused
        story["verdict"] = "sick"
        log.warning("remedy: %s names %s, which this run's config refuses (%s); the run stops as sick",
                    sick.name, " ".join(sick.remedy.overrides), refused)
        return
    story["attempts"].append(following)
    log.warning("remedy: attempt %d found %s; attempt %d starts %s with %s", attempt["number"], sick.name,
                attempt["number"] + 1, following["restart"], " ".join(sick.remedy.overrides))


def remedied_config(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The run's config with `overrides` applied, as Hydra would apply them."""
    new = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    for override in overrides:
        key, value = override.split("=", 1)
        if (CONF_DIR / key).is_dir():  # a config group: precision=bf16 takes that option's whole node
            option = yaml.safe_load((CONF_DIR / key / f"{value}.yaml").read_text())
            option.pop("defaults", None)
            new[key] = option
        else:
            OmegaConf.update(new, key, yaml.safe_load(value), merge=False)
    return new


def _refused(cfg: DictConfig, overrides: list[str], world_size: int) -> str | None:
    """Why the config checks refuse these remedies, before anything of the next attempt is written."""
    try:
        validate_config(remedied_config(cfg, overrides), world_size)
    except ConfigError as err:
        return str(err)
    return None


def attempt_config(cfg: DictConfig, attempt: dict[str, Any], attempt_dir: Path,
                   dist: DistInfo = DistInfo()) -> DictConfig:
    """The run's config with this attempt's remedies applied; it resumes whatever its dir holds (a
    checkpoint copied from the attempt before by rank 0, or its own after a kill)."""
    new = remedied_config(cfg, attempt["overrides"])
    if dist.is_main and attempt["restart_checkpoint"] and not step_checkpoints(attempt_dir):  # once, also after a kill
        (attempt_dir / CKPT_DIR).mkdir(parents=True, exist_ok=True)
        source = Path(attempt["restart_checkpoint"]).resolve()  # best.dcp is a link to its directory
        target = attempt_dir / CKPT_DIR / f"step_{attempt['restart_step']:08d}{source.suffix}"
        shutil.copytree(source, target) if source.is_dir() else shutil.copy2(source, target)
    barrier(dist)  # the copy is in place before any rank looks for it
    new.resume = "auto" if attempt["number"] > 1 or cfg.resume == "auto" else cfg.resume
    new.diagnose.abort_on = new.diagnose.abort_on or ("remedy" if new.diagnose.live else None)
    return new


def _next_attempt(attempt: dict[str, Any], sick: Finding, attempt_dir: Path) -> dict[str, Any]:
    remedy = sick.remedy
    assert remedy is not None
    point = _restart_point(attempt_dir, remedy)
    restart = f"from step {point[1]} of attempt {attempt['number']}" if point else "from scratch"
    return _attempt(attempt["number"] + 1, [*attempt["overrides"], *remedy.overrides], restart, point)


def _restart_point(attempt_dir: Path, remedy: Remedy) -> tuple[Path, int] | None:
    """The last checkpoint before the symptom, for a remedy that may continue one: a step
    checkpoint, or best.pt (best.dcp, sharded) when the rotation (trainer.keep_last) already removed the older ones."""
    if remedy.restart is Restart.SCRATCH:
        return None
    steps = [(path, step_of(path)) for path in step_checkpoints(attempt_dir)]
    for best in (attempt_dir / CKPT_DIR / "best.pt", attempt_dir / CKPT_DIR / BEST_LINK):
        if best.exists():  # its step is inside it
            steps.append((best, int(load_checkpoint(best)["step"])))
    before = [(path, step) for path, step in steps if 0 < step and (remedy.before_step is None
                                                                    or step < remedy.before_step)]
    return max(before, key=lambda found: found[1]) if before else None


def _attempt(number: int, overrides: list[str], restart: str, point: tuple[Path, int] | None) -> dict[str, Any]:
    return {"number": number, "overrides": overrides, "restart": restart,
            "restart_checkpoint": str(point[0]) if point else None, "restart_step": point[1] if point else None}


def _remedy_record(remedy: Remedy) -> dict[str, Any]:
    return {"overrides": list(remedy.overrides), "restart": remedy.restart.value, "why": remedy.why,
            "before_step": remedy.before_step}


def _load_story(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / STORY
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError("resume", "auto", f"a run dir whose {STORY} is readable ({err})") from None


def _save(run_dir: Path, story: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_json_dump(story, run_dir / STORY)


def _write_top(run_dir: Path, story: dict[str, Any]) -> None:
    """RUN_DIR/summary.json: the last attempt's, with the story; RUN_DIR/report.md: the story, then
    the last attempt's report."""
    last = run_dir / ATTEMPTS / str(len(story["attempts"]))
    summary = json.loads((last / "summary.json").read_text())
    summary.update(remedy_verdict=story["verdict"], attempts=copy.deepcopy(story["attempts"]))
    atomic_json_dump(summary, run_dir / "summary.json")
    lines = [f"# Remedies: {story['verdict']}", "", "| attempt | started | overrides | ended | steps | best val loss "
             "| critical findings | remedy chosen |", "|---|---|---|---|---|---|---|---|"]
    for a in story["attempts"]:
        best = "—" if a.get("best_val_loss") is None else f"{a['best_val_loss']:.4g}"
        chosen = f"`{' '.join(a['remedy']['overrides'])}` ({a['finding']})" if a.get("remedy") else "—"
        if a.get("remedy", {}).get("refused"):
            chosen += f", refused: {a['remedy']['refused']}"
        lines.append(f"| [{a['number']}](attempts/{a['number']}/report.md) | {a['restart']} | "
                     f"`{' '.join(a['overrides']) or '(as given)'}` | {a.get('status', '?')} | {a.get('steps', '?')} "
                     f"| {best} | {', '.join(a.get('critical', [])) or 'none'} | {chosen} |")
    report = last / "report.md"
    body = report.read_text() if report.is_file() else ""
    (run_dir / "report.md").write_text("\n".join(lines) + "\n\n" + body.replace("](plots/", f"](attempts/{last.name}/plots/"))
