"""Which attempt comes next. A finding lists candidate remedies, the likeliest cause first; the next
attempt applies the first candidate of a kind this run has not tried yet (a second LR cut is not a
new idea), on top of the attempt it builds on (an attempt that ran to its end with no critical
finding has its warnings' candidates tried, and, once a remedy has been tried, its infos'):
- from a copy of that attempt's last checkpoint before the symptom (LR, clip, precision, accumulation);
- from scratch (init, activation, architecture, optimizer, schedule shape), or when no checkpoint qualifies.
A kept LR move names the LR as the cause, so an LR search follows it: the same factor again from
the same point while each step is kept (unless the kept attempt's own findings move the LR the
other way: they go first), and the geometric midpoint once after a 10x step that overshot. A
critical finding that blames the data code stops the remedies.
"""
from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from harness.config.run_config import RunConfig
from harness.core.errors import ConfigError
from harness.diagnosis.findings import Finding, Remedy, Restart, Severity
from harness.diagnosis.remedies import BLOWUP_LR_FACTOR, LR_KINDS, lr_step
from harness.diagnosis.rules import DATA_CODE_CAUSES
from harness.remedy.judge import best
from harness.remedy.story import (FURTHER, KEPT, MIDPOINT, REJECTED, Applied, Attempt, Refusal, Story, attempt_dir,
                                  idea_of)
from harness.state.checkpoint import best_checkpoints, checkpoint_problem, load_checkpoint, step_checkpoints, step_of

log = logging.getLogger("harness")
FINISHED = ("completed", "early_stopped")  # an attempt that ran its course: its warnings may be acted on
Point = tuple[Path, int]  # a checkpoint to start from, and its step


def next_attempt(config: RunConfig, story: Story, attempt: Attempt, current: Attempt, current_dir: Path,
                 findings: list[Finding], scope: str, world_size: int) -> Attempt | None:
    """What follows the attempt that just ended. An LR move that measurably helped names the LR as
    the cause, so the search goes on along it (see `_lr_further`), unless the findings still name a
    training change of another kind (AdamW for an SGD run still diverging); a further LR step that
    overshot is halved first. Otherwise the findings' next untried candidate. None while a critical
    finding blames the data code: that fix needs a person."""
    in_the_data = [f.name for f in findings if f.severity is Severity.CRITICAL and f.name in DATA_CODE_CAUSES]
    if in_the_data:
        log.warning("remedy: %s: the fix is in the data code, so no training change is tried", in_the_data[0])
        return None
    midpoint = _lr_midpoint(config, story, attempt, current, world_size)
    if midpoint is not None:
        return midpoint
    further = _lr_further(config, story, current, world_size)
    if further is not None and not _argued_against(further, findings):
        return next_candidate(config, story, current, current_dir, findings, "training", world_size,
                              latent=False) or further
    return next_candidate(config, story, current, current_dir, findings, scope, world_size)


def _argued_against(further: Attempt, findings: list[Finding]) -> bool:
    """Whether the kept attempt's own findings, at any severity, move its LR the other way (a cut
    that stopped the divergence, on a run now learning far too slowly): its measurement beats
    repeating the last move, so the findings' candidates go first."""
    opposite = "lr_up" if further.applied.kind == "lr_down" else "lr_down"
    return any(remedy.kind == opposite for finding in findings for remedy in finding.remedies)


def next_candidate(config: RunConfig, story: Story, current: Attempt, current_dir: Path, findings: list[Finding],
                   scope: str, world_size: int, latent: bool = True) -> Attempt | None:
    """The next attempt: the first critical finding's first candidate of a kind not tried yet (and
    allowed by `diagnose.remedy_scope`), on top of `current`; None when there is none. When
    `current` ran to its end with no critical finding, its warnings' candidates are tried the same
    way: a warning never stops a run, but a run that finished with one may still do measurably
    better. Once a remedy has been tried (the run as given was sick), so are the candidates of its
    infos, the latent causes a run that learned can carry (raw inputs, units lost): the sick run
    is being repaired anyway, and the judge keeps only what measurably helps; a run as given with
    infos alone is never restarted, and an LR search in progress (`latent` False) goes on first.
    A candidate the config checks refuse is recorded and skipped."""
    tried = {a.applied.idea for a in story.attempts if a.applied is not None}
    refused_before = [r.overrides for r in story.refused]  # a scope-limited pass may have met them
    acted_on = [f for f in findings if f.severity is Severity.CRITICAL]
    if not acted_on and current.status in FINISHED:
        acted_on = [f for f in findings if f.severity is Severity.WARNING]
        if latent and len(story.attempts) > 1:  # repairs are under way: the latent causes too, after the warnings
            acted_on += [f for f in findings if f.severity is Severity.INFO]
    for finding in acted_on:
        for remedy in finding.remedies:
            new = idea_of(remedy.kind, remedy.overrides)
            if new in tried or (remedy.changes_model and scope == "training") or list(remedy.overrides) in refused_before:
                continue
            following = _follow(story, current, current_dir, finding, remedy)
            why = refused(config, following.overrides, world_size)
            if why is None:
                return following
            story.refused.append(Refusal(finding.name, list(remedy.overrides), why))
            log.warning("remedy: %s names %s, which this run's config refuses (%s)", finding.name,
                        " ".join(remedy.overrides), why)
            tried.add(new)
    return None


def _lr_further(config: RunConfig, story: Story, current: Attempt, world_size: int) -> Attempt | None:
    """`current` is a kept LR move not followed yet: the same factor once more (10x at most: a move
    that jumped to the edge of an adaptive optimizer's range is not repeated in full), from the point that move
    started at (the two are compared there). None otherwise."""
    applied = current.applied
    if (applied is None or applied.kind not in LR_KINDS or applied.search == MIDPOINT or current.outcome != KEPT
            or any(a.base == current.number and a.applied is not None and a.applied.search for a in story.attempts)):
        return None
    factor = _lr_factor(config, story.attempt(current.base), current)
    if factor is None:
        return None
    factor = min(max(factor, 1 / BLOWUP_LR_FACTOR), BLOWUP_LR_FACTOR)
    return _lr_step(config, story, current, current, factor, FURTHER, world_size)


def _lr_midpoint(config: RunConfig, story: Story, attempt: Attempt, current: Attempt,
                 world_size: int) -> Attempt | None:
    """A further LR step of 10x or more that was rejected overshot: the geometric midpoint between
    it and the kept move it followed (`current`), once. None otherwise."""
    if attempt.applied is None or attempt.applied.search != FURTHER or attempt.outcome != REJECTED:
        return None
    factor = _lr_factor(config, current, attempt)
    if factor is None or abs(math.log10(factor)) < 1 - 1e-9:
        return None
    return _lr_step(config, story, current, attempt, math.sqrt(factor), MIDPOINT, world_size)


def _lr_factor(config: RunConfig, before: Attempt, after: Attempt) -> float | None:
    lr_before, lr_after = (_lr(config, a.overrides) for a in (before, after))
    if lr_before is None or lr_after is None or lr_before <= 0 or lr_after <= 0:
        return None
    return lr_after / lr_before


def _lr_step(config: RunConfig, story: Story, start: Attempt, started_like: Attempt, factor: float, search: str,
             world_size: int) -> Attempt | None:
    """`start`'s LR times `factor`, on top of `start`, from the restart point `started_like` used
    (from scratch when that checkpoint is gone); None when the config checks refuse it."""
    point = None
    source = started_like.restart_checkpoint
    if source and checkpoint_problem(Path(source).resolve()) is None:
        point = (Path(source), started_like.restart_step)
    remedy = lr_step(_lr(config, start.overrides), factor, start.applied.kind, search == MIDPOINT,
                     Restart.CHECKPOINT if point else Restart.SCRATCH)
    overrides = [o for o in start.overrides if not o.startswith("optim.lr=")] + list(remedy.overrides)
    if refused(config, overrides, world_size) is not None:
        return None
    return _attempt(story, overrides, started_like.restart if point else "from scratch", point, base=start.number,
                    applied=Applied.of(start.applied.finding, remedy, search))


def _lr(config: RunConfig, overrides: list[str]) -> float | None:
    lr = config.with_overrides(overrides).optim.options.get("lr")
    return float(lr) if isinstance(lr, (int, float)) and not isinstance(lr, bool) else None


def finish_best(story: Story, run_dir: Path) -> Attempt | None:
    """An attempt the live diagnosis stopped early (to try a remedy) is continued to its end without
    stopping: first the run as given, which the result must not end worse than, then the best
    attempt. remedy=auto must not end worse than the same run without it, which would have trained
    on. None when neither was stopped early, or both were finished already."""
    result = best(story)
    for candidate in [story.attempts[0], *([result] if result.number != 1 else [])]:
        if any(a.finishes == candidate.number for a in story.attempts):
            continue
        candidate_dir = attempt_dir(run_dir, candidate)
        summary = json.loads((candidate_dir / "summary.json").read_text())
        stopped_by = summary.get("stopped_by") or {}
        if stopped_by.get("severity") != Severity.CRITICAL.value or summary["steps"] >= summary["max_steps"]:
            continue
        point = restart_point(candidate_dir, None)
        if point is not None:
            return _attempt(story, list(candidate.overrides),
                            f"from step {point[1]} of attempt {candidate.number}, to its end", point,
                            base=candidate.number, finishes=candidate.number)
    return None


def _follow(story: Story, current: Attempt, current_dir: Path, finding: Finding, remedy: Remedy) -> Attempt:
    point = None if remedy.restart is Restart.SCRATCH else restart_point(current_dir, remedy.before_step)
    restart = f"from step {point[1]} of attempt {current.number}" if point else "from scratch"
    return _attempt(story, [*current.overrides, *remedy.overrides], restart, point, base=current.number,
                    applied=Applied.of(finding.name, remedy))


def _attempt(story: Story, overrides: list[str], restart: str, point: Point | None, **more: object) -> Attempt:
    return Attempt(len(story.attempts) + 1, overrides, restart, str(point[0]) if point else None,
                   point[1] if point else None, **more)


def restart_point(run_dir: Path, before_step: int | None) -> Point | None:
    """The attempt's last checkpoint before `before_step` (the symptom; None: any) and before its
    end: a step checkpoint, or best.pt (best.dcp, sharded) when the rotation (trainer.keep_last)
    already removed the older ones."""
    steps = [(path, step_of(path)) for path in step_checkpoints(run_dir)]
    for found in best_checkpoints(run_dir):
        if found.exists():  # its step is inside it (a broken best.dcp link holds none)
            steps.append((found, int(load_checkpoint(found)["step"])))
    end = json.loads((run_dir / "summary.json").read_text())["max_steps"]  # a checkpoint there trains nothing
    before = [(path, step) for path, step in steps if 0 < step < end and (before_step is None or step < before_step)]
    return max(before, key=lambda point: point[1]) if before else None


def refused(config: RunConfig, overrides: list[str], world_size: int) -> str | None:
    """Why the config checks refuse these remedies, before anything of the next attempt is written."""
    try:
        config.with_overrides(overrides, world_size)
    except ConfigError as err:
        return str(err)
    return None
