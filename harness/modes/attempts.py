"""`diagnose.remedy=auto`: a run that the diagnosis calls sick starts again with a fix its finding
names, keeps the fix only when the run measurably improved, and ends with its best attempt.

Each attempt is a complete run dir, RUN_DIR/attempts/N/ (config, metrics, checkpoints, report).
An attempt ends when a critical finding that carries remedies appears (live, at an eval: the
attempt runs with `diagnose.abort_on=remedy`) or when it finishes. A finding lists candidate
remedies, the likeliest cause first; the next attempt applies the first candidate of a kind this
run has not tried yet (a second LR cut is not a new idea), on top of the attempt it builds on (an
attempt that ran to its end with no critical finding has its warnings' candidates tried):
- from a copy of that attempt's last checkpoint before the symptom (LR, clip, precision, accumulation);
- from scratch (init, activation, architecture, optimizer, schedule shape), or when no checkpoint qualifies.
A critical finding that blames the data code (`split_mismatch`) stops the remedies: no training
change fixes labels or inputs prepared differently for each split.

An attempt is judged by outcome: it is kept when its best val loss, up to the last step both it and
the attempt it builds on reached, beats that attempt's by more than 1% and twice the eval-to-eval
noise. A kept attempt is what the next remedy builds on; a rejected one is set aside and the next
candidate starts from where it did. A kept LR move names the LR as the cause, so an LR search
follows it: the same factor again from the same point while each step is kept, and the geometric
midpoint once after a 10x step that overshot. After `max_attempts` remedies, or when no candidate is left,
the run ends with its best attempt (lowest best val loss): RUN_DIR/summary.json is that attempt's
(plus the story), and so is the objective a sweep gets, so remedies never leave a run worse than
it was given. The verdict: `healthy` (nothing to remedy), `healed` (the best attempt is a remedied
one, better than the first, with no critical finding and, for classification, an accuracy clearly
above guessing), `unchanged` (no remedy beat the run as given), `sick` (better, but still sick).
RUN_DIR/attempts.json keeps the story, written before each attempt starts, so `resume=auto` after
a kill continues the attempt that was running, exactly.
"""
from __future__ import annotations

import copy
import json
import logging
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
from omegaconf import DictConfig, OmegaConf

from harness.state.checkpoint import (best_checkpoints, checkpoint_problem, copy_checkpoint, load_checkpoint,
                                      step_checkpoints, step_of)
from harness.state.files import atomic_json_dump
from harness.config.run_config import RunConfig, validate_config
from harness.core.config_keys import CONF_DIR
from harness.diagnosis import diagnose, load_run
from harness.diagnosis.load import RunData, Series
from harness.diagnosis.findings import Finding, Remedy, Restart, Severity
from harness.diagnosis.remedies import LR_KINDS, lr_step
from harness.diagnosis.report import PLOTS_PENDING
from harness.diagnosis.rules import DATA_CODE_CAUSES
from harness.diagnosis.rules.curves import guessing_accuracy_bound
from harness.diagnosis.signals import noise_level
from harness.core.metric_names import VAL_LOSS
from harness.core.distributed import DistInfo, barrier, broadcast_object
from harness.core.errors import ConfigError
from harness.state.rundir import CKPT_DIR, stored_objective

log = logging.getLogger("harness")
STORY = "attempts.json"
ATTEMPTS = "attempts"
FURTHER, MIDPOINT = "further", "midpoint"  # the LR search's steps: the same factor again; half of an overshoot
FINISHED = ("completed", "early_stopped")  # an attempt that ran its course: its warnings may be acted on
KEPT_AT_THE_END = "kept at the end"  # rejected where its base stopped early, better once the base was finished
SEARCH_NOTE = {FURTHER: " (LR search: the kept factor again)", MIDPOINT: " (LR search: the midpoint of an overshoot)"}

TrainOne = Callable[[DictConfig, Path], Any]  # trains one attempt's config in its run dir; returns the objective


def run_attempts(config: RunConfig, run_dir: Path, train_one: TrainOne, dist: DistInfo = DistInfo()) -> Any:
    """Train attempt after attempt until no remedy is left to try. Under torchrun every rank trains
    each attempt; rank 0 judges it and writes the story, and every rank follows its verdict."""
    cfg, settings = config.raw, config.diagnose
    story = load_story(run_dir) if config.job.resume == "auto" else None
    if story is None:
        story = {"max_attempts": settings.max_attempts, "attempts": [_attempt(1, [], "as given", None)], "verdict": None}
    elif story["verdict"] is not None:
        log.info("%s: the remedies are done (%s); nothing was changed", run_dir, story["verdict"])
        return stored_objective(run_dir / ATTEMPTS / str(story.get("best_attempt", len(story["attempts"]))))
    while story["verdict"] is None:
        attempt = story["attempts"][-1]
        attempt_dir = run_dir / ATTEMPTS / str(attempt["number"])
        if dist.is_main:
            _save(run_dir, story)  # before it starts: a kill from here on resumes this attempt
        train_one(attempt_config(cfg, attempt, attempt_dir, dist), attempt_dir)
        barrier(dist)  # rank 0's summary.json and metrics are complete
        if dist.is_main:
            _judge(cfg, story, run_dir, settings.remedy_scope, dist.world_size)
        story = broadcast_object(story, dist)
    if dist.is_main:
        _save(run_dir, story)
        write_top(run_dir, story)
    barrier(dist)
    return stored_objective(run_dir / ATTEMPTS / str(story["best_attempt"]))


def _judge(cfg: DictConfig, story: dict[str, Any], run_dir: Path, scope: str, world_size: int) -> None:
    """The attempt that just ended: its outcome against the attempt it builds on, then the next
    attempt (the next untried candidate of the finding in question) or the verdict."""
    attempt = story["attempts"][-1]
    attempt_dir = run_dir / ATTEMPTS / str(attempt["number"])
    run = load_run(attempt_dir)
    findings = diagnose(run)
    summary = json.loads((attempt_dir / "summary.json").read_text())
    attempt.update(status=summary["status"], steps=summary["steps"], best_val_loss=summary["best_val_loss"],
                   best_val_accuracy=summary.get("best_val_accuracy"), final_train_loss=summary["final_train_loss"],
                   critical=[f.name for f in findings if f.severity is Severity.CRITICAL],
                   learned=learned(run))
    base = _by_number(story, attempt.get("base"))
    if base is not None:
        cleared = bool(base.get("critical")) and not attempt["critical"]
        attempt["outcome"] = "kept" if _better(run, load_run(run_dir / ATTEMPTS / str(base["number"])),
                                               cleared) else "rejected"
    current = attempt if base is None or attempt["outcome"] == "kept" else base
    current_dir = run_dir / ATTEMPTS / str(current["number"])
    if current is not attempt:  # set aside: the next candidate starts where this one did
        findings = diagnose(load_run(current_dir))
    remedies = sum(1 for a in story["attempts"] if a.get("applied"))
    if attempt.get("finishes"):  # the run as it was, finished: nothing follows it
        _rejudge_at_the_end(story, attempt, log_noise(run.series(VAL_LOSS, kind="eval")))
        _conclude(story)
        return
    following = None
    if remedies < story["max_attempts"]:
        following = _next_attempt(cfg, story, attempt, current, current_dir, findings, scope, world_size)
    if following is None:
        following = _finish_best(story, run_dir)
        if following is None:
            _conclude(story)
            return
        story["attempts"].append(following)
        log.warning("remedy: no remedy left to try; attempt %d continues attempt %d, stopped early by its finding, "
                    "to its end", following["number"], following["finishes"])
        return
    story["attempts"].append(following)
    applied = following["applied"]
    found = f"found {applied['finding']}" if not applied.get("search") else "ended"
    log.warning("remedy: attempt %d (%s) %s; attempt %d starts %s with %s%s", attempt["number"],
                attempt.get("outcome", "as given"), found, following["number"], following["restart"],
                " ".join(applied["overrides"]), f" ({applied['why']})" if applied.get("search") else "")


def _next_candidate(cfg: DictConfig, story: dict[str, Any], current: dict[str, Any], current_dir: Path,
                    findings: list[Finding], scope: str, world_size: int) -> dict[str, Any] | None:
    """The next attempt: the first critical finding's first candidate of a kind not tried yet (and
    allowed by `diagnose.remedy_scope`), on top of `current`; None when there is none. When
    `current` ran to its end with no critical finding, its warnings' candidates are tried the same
    way: a warning never stops a run, but a run that finished with one may still do measurably
    better. A candidate the config checks refuse is recorded and skipped."""
    tried = {a["applied"]["kind"] or " ".join(a["applied"]["overrides"]) for a in story["attempts"] if a.get("applied")}
    refused_before = [r["overrides"] for r in story.get("refused", [])]  # a scope-limited pass may have met them
    acted_on = [f for f in findings if f.severity is Severity.CRITICAL]
    if not acted_on and current.get("status") in FINISHED:
        acted_on = [f for f in findings if f.severity is Severity.WARNING]
    for finding in acted_on:
        for remedy in finding.remedies:
            if ((remedy.kind or " ".join(remedy.overrides)) in tried or (remedy.changes_model and scope == "training")
                    or list(remedy.overrides) in refused_before):
                continue
            following = _follow(story, current, current_dir, finding, remedy)
            refused = _refused(cfg, following["overrides"], world_size)
            if refused is None:
                return following
            story.setdefault("refused", []).append({"finding": finding.name, "overrides": list(remedy.overrides),
                                                    "why": refused})
            log.warning("remedy: %s names %s, which this run's config refuses (%s)", finding.name,
                        " ".join(remedy.overrides), refused)
            tried.add(remedy.kind or " ".join(remedy.overrides))
    return None


def _next_attempt(cfg: DictConfig, story: dict[str, Any], attempt: dict[str, Any], current: dict[str, Any],
                  current_dir: Path, findings: list[Finding], scope: str, world_size: int) -> dict[str, Any] | None:
    """What follows the attempt that just ended. An LR move that measurably helped names the LR as
    the cause, so the search goes on along it (see `_lr_further`), unless the findings still name a
    training change of another kind (AdamW for an SGD run still diverging); a further LR step that
    overshot is halved first. Otherwise the findings' next untried candidate. None while a critical
    finding blames the data code: that fix needs a person."""
    in_the_data = [f.name for f in findings if f.severity is Severity.CRITICAL and f.name in DATA_CODE_CAUSES]
    if in_the_data:
        log.warning("remedy: %s: the fix is in the data code, so no training change is tried", in_the_data[0])
        return None
    midpoint = _lr_midpoint(cfg, story, attempt, current, world_size)
    if midpoint is not None:
        return midpoint
    further = _lr_further(cfg, story, current, world_size)
    if further is not None:
        return _next_candidate(cfg, story, current, current_dir, findings, "training", world_size) or further
    return _next_candidate(cfg, story, current, current_dir, findings, scope, world_size)


def _lr_further(cfg: DictConfig, story: dict[str, Any], current: dict[str, Any],
                world_size: int) -> dict[str, Any] | None:
    """`current` is a kept LR move not followed yet: the same factor once more, from the point that
    move started at (the two are compared there). None otherwise."""
    applied = current.get("applied") or {}
    if (applied.get("kind") not in LR_KINDS or applied.get("search") == MIDPOINT or current.get("outcome") != "kept"
            or any(a.get("base") == current["number"] and (a.get("applied") or {}).get("search")
                   for a in story["attempts"])):
        return None
    factor = _lr_factor(cfg, _by_number(story, current["base"]), current)
    return None if factor is None else _lr_step(cfg, story, current, current, factor, FURTHER, world_size)


def _lr_midpoint(cfg: DictConfig, story: dict[str, Any], attempt: dict[str, Any], current: dict[str, Any],
                 world_size: int) -> dict[str, Any] | None:
    """A further LR step of 10x or more that was rejected overshot: the geometric midpoint between
    it and the kept move it followed (`current`), once. None otherwise."""
    applied = attempt.get("applied") or {}
    if applied.get("search") != FURTHER or attempt.get("outcome") != "rejected":
        return None
    factor = _lr_factor(cfg, current, attempt)
    if factor is None or abs(math.log10(factor)) < 1 - 1e-9:
        return None
    return _lr_step(cfg, story, current, attempt, math.sqrt(factor), MIDPOINT, world_size)


def _lr_factor(cfg: DictConfig, before: dict[str, Any], after: dict[str, Any]) -> float | None:
    lr_before, lr_after = (_lr(cfg, a["overrides"]) for a in (before, after))
    if lr_before is None or lr_after is None or lr_before <= 0 or lr_after <= 0:
        return None
    return lr_after / lr_before


def _lr_step(cfg: DictConfig, story: dict[str, Any], start: dict[str, Any], started_like: dict[str, Any],
             factor: float, search: str, world_size: int) -> dict[str, Any] | None:
    """`start`'s LR times `factor`, on top of `start`, from the restart point `started_like` used
    (from scratch when that checkpoint is gone); None when the config checks refuse it."""
    point = None
    source = started_like["restart_checkpoint"]
    if source and checkpoint_problem(Path(source).resolve()) is None:
        point = (Path(source), started_like["restart_step"])
    applied = start["applied"]
    remedy = lr_step(_lr(cfg, start["overrides"]), factor, applied["kind"], search == MIDPOINT,
                     Restart.CHECKPOINT if point else Restart.SCRATCH)
    overrides = [o for o in start["overrides"] if not o.startswith("optim.lr=")] + list(remedy.overrides)
    if _refused(cfg, overrides, world_size) is not None:
        return None
    following = _attempt(len(story["attempts"]) + 1, overrides, started_like["restart"] if point else "from scratch",
                         point)
    following.update(base=start["number"], applied={"finding": applied["finding"], **_remedy_record(remedy),
                                                    "search": search})
    return following


def _lr(cfg: DictConfig, overrides: list[str]) -> float | None:
    lr = remedied_config(cfg, overrides).optim.get("lr")
    return float(lr) if isinstance(lr, (int, float)) and not isinstance(lr, bool) else None


def _rejudge_at_the_end(story: dict[str, Any], finished: dict[str, Any], noise: float) -> None:
    """A remedy was judged against its base where the base stopped, early, for the remedy; one that
    starts over may trail there and still end far better. Once the base is finished (`finished`
    continues it to its end), a rejected remedy on it that also ran to the end is compared where
    both ended, by the same margin: better than the whole run as given, it is kept after all."""
    base = _by_number(story, finished["finishes"])
    given = min(ranked_loss(base.get("best_val_loss")), ranked_loss(finished.get("best_val_loss")))
    if not math.isfinite(given):
        return
    for attempt in story["attempts"]:
        if (attempt.get("base") == base["number"] and attempt.get("outcome") == "rejected"
                and not attempt.get("finishes") and attempt.get("steps") == finished.get("steps")
                and _beats(ranked_loss(attempt.get("best_val_loss")), given, noise)):
            attempt["outcome"] = KEPT_AT_THE_END


def _best(story: dict[str, Any]) -> dict[str, Any]:
    """The attempt with the lowest best val loss (no val loss ranks last; the earlier one on a tie)
    among those that may be the result: the run as given, remedies kept for doing measurably
    better (also at the end, once a base stopped early was finished), and the continuations that
    finish them. A rejected remedy is not, however low it ended: it did not beat its base where both
    had trained, and a base the live diagnosis stopped early is finished instead, so that
    remedy=auto never ends below the run as given."""
    eligible = [a for a in story["attempts"] if a.get("outcome") != "rejected" or a.get("finishes")]
    return min(eligible, key=lambda a: (ranked_loss(a.get("best_val_loss")), a["number"]))


def _finish_best(story: dict[str, Any], run_dir: Path) -> dict[str, Any] | None:
    """When the best attempt is one the live diagnosis stopped early (to try a remedy), it is
    continued to its end without stopping: remedy=auto must not end worse than the same run
    without it, which would have trained on. None when it ran to its end or stopped on its own."""
    best = _best(story)
    best_dir = run_dir / ATTEMPTS / str(best["number"])
    summary = json.loads((best_dir / "summary.json").read_text())
    stopped_by = summary.get("stopped_by") or {}
    if stopped_by.get("severity") != Severity.CRITICAL.value or summary["steps"] >= summary["max_steps"]:
        return None
    point = _restart_point(best_dir, None)
    if point is None:
        return None
    following = _attempt(len(story["attempts"]) + 1, list(best["overrides"]),
                         f"from step {point[1]} of attempt {best['number']}, to its end", point)
    following.update(base=best["number"], finishes=best["number"])
    return following


def _conclude(story: dict[str, Any]) -> None:
    """The best attempt (lowest best val loss; no val loss ranks last) and the verdict."""
    attempts = story["attempts"]
    best = _best(story)
    story["best_attempt"] = best["number"]
    first = attempts[0]
    if len(attempts) == 1:
        story["verdict"] = "sick" if first["critical"] else "healthy"
    elif best is first or best.get("finishes") == first["number"]:
        story["verdict"] = "unchanged"
    else:
        story["verdict"] = "healed" if not best["critical"] and best.get("learned", True) else "sick"
    log.warning("remedy: %s; the run's result is attempt %d's (best val loss %s)", story["verdict"], best["number"],
                best.get("best_val_loss"))


def ranked_loss(value: Any) -> float:
    """A best val loss for ranking attempts: a missing or non-finite one ranks below every finite one."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.inf


def learned(run: RunData) -> bool:
    """A classifier learned when its best val accuracy is clearly above what guessing the largest
    class gets on the same samples; other tasks by their loss alone."""
    accuracy = run.summary.get("best_val_accuracy")
    chance = run.summary.get("chance_loss")
    if accuracy is None or not chance:
        return True
    return accuracy > guessing_accuracy_bound(run, round(math.exp(chance)))


# An attempt beats the one it builds on when its best val loss up to the last step both reached is
# lower by more than 1% and more than twice the eval-to-eval noise of the attempt it replaces: an
# eval of fixed batches wobbles by the model's own noise, and a remedy that only matches the
# attempt before it changed nothing worth keeping, unless it cleared the critical findings the
# attempt before it had. The noise is measured on the log of the loss:
# a loss wobbles in proportion to its size, so a base that oscillated between 0.2 and 50 is beaten
# by a remedy that ends at 0.001, and the same ratio counts at any scale.
BETTER_BY = 0.01
NOISE_SIGMAS = 2.0


def _better(new: RunData, old: RunData, cleared: bool = False) -> bool:
    """Whether `new` beats `old` (see above); one that `cleared` every critical finding of `old` only
    has to be at least as low: a run as good and no longer sick is better."""
    new_val, old_val = (r.series(VAL_LOSS, kind="eval") for r in (new, old))
    if not len(new_val.steps):
        return False
    if not len(old_val.steps):
        return True
    # where both have evals; a continuation whose first eval falls after the run it continues stopped
    # is compared at that first eval
    common = max(min(int(new_val.steps[-1]), int(old_val.steps[-1])), int(new_val.steps[0]))
    new_best, old_best = _best_until(new_val, common), _best_until(old_val, common)
    if not math.isfinite(new_best) or not math.isfinite(old_best):
        return math.isfinite(new_best)
    return (cleared and new_best <= old_best) or _beats(new_best, old_best, log_noise(old_val))


def log_noise(val: Series) -> float:
    """The eval-to-eval noise of a val loss curve, as a log ratio (positive losses only)."""
    finite = val.finite()
    positive = finite.values > 0
    return noise_level(Series(finite.steps[positive], np.log(finite.values[positive])))


def _beats(new_best: float, old_best: float, noise: float) -> bool:
    """Lower than `old_best` by more than BETTER_BY of it and NOISE_SIGMAS times its eval noise
    (`noise` a log ratio); a loss at or below 0 by BETTER_BY of its size alone."""
    if old_best <= 0 or new_best <= 0:
        return new_best < old_best - BETTER_BY * abs(old_best)
    return math.log(new_best) < math.log(old_best) + min(math.log1p(-BETTER_BY), -NOISE_SIGMAS * noise)


def _best_until(val: Series, step: int) -> float:
    values = val.values[val.steps <= step]
    finite = values[np.isfinite(values)]
    return float(finite.min()) if len(finite) else math.inf


def _by_number(story: dict[str, Any], number: int | None) -> dict[str, Any] | None:
    return None if number is None else story["attempts"][number - 1]


def remedied_config(cfg: DictConfig, overrides: list[str]) -> DictConfig:
    """The run's config with `overrides` applied, as Hydra would apply them."""
    new = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    for override in overrides:
        key, value = override.split("=", 1)
        if (CONF_DIR / key).is_dir():  # a config group: precision=bf16 takes that option's whole node
            option = OmegaConf.load(CONF_DIR / key / f"{value}.yaml")  # OmegaConf's YAML reads 1e-8 as a float
            option.pop("defaults", None)
            new[key] = option
        else:
            OmegaConf.update(new, key, OmegaConf.create(f"value: {value}")["value"], merge=False)  # 1e-7: a float
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
    if dist.is_main and attempt["restart_checkpoint"]:
        _place_restart_checkpoint(attempt, attempt_dir)
    barrier(dist)  # the copy is in place before any rank looks for it
    new.resume = "auto" if attempt["number"] > 1 or cfg.resume == "auto" else cfg.resume
    stops_for_remedies = new.diagnose.live and not attempt.get("finishes")  # the last one runs to its end
    new.diagnose.abort_on = new.diagnose.abort_on or ("remedy" if stops_for_remedies else None)
    return new


def _place_restart_checkpoint(attempt: dict[str, Any], attempt_dir: Path) -> None:
    """Copy the checkpoint the story starts this attempt from into its dir, once (also after a kill:
    a resume finds the attempt's own checkpoints), atomically. A story whose checkpoint is gone or
    damaged, with no whole checkpoint of the attempt's own, is refused rather than run from scratch."""
    if any(checkpoint_problem(path) is None for path in step_checkpoints(attempt_dir)):
        return
    source = Path(attempt["restart_checkpoint"]).resolve()  # best.dcp is a link to its directory
    problem = checkpoint_problem(source)
    if problem is not None:
        raise ConfigError("resume", "auto", f"a run whose {STORY} and checkpoints agree: attempt {attempt['number']} "
                                            f"starts {attempt['restart']}, and {source} is {problem}")
    (attempt_dir / CKPT_DIR).mkdir(parents=True, exist_ok=True)
    copy_checkpoint(source, attempt_dir / CKPT_DIR / f"step_{attempt['restart_step']:08d}{source.suffix}")


def _follow(story: dict[str, Any], current: dict[str, Any], current_dir: Path, finding: Finding,
            remedy: Remedy) -> dict[str, Any]:
    point = None if remedy.restart is Restart.SCRATCH else _restart_point(current_dir, remedy.before_step)
    restart = f"from step {point[1]} of attempt {current['number']}" if point else "from scratch"
    following = _attempt(len(story["attempts"]) + 1, [*current["overrides"], *remedy.overrides], restart, point)
    following.update(base=current["number"], applied={"finding": finding.name, **_remedy_record(remedy)})
    return following


def _restart_point(attempt_dir: Path, before_step: int | None) -> tuple[Path, int] | None:
    """The attempt's last checkpoint before `before_step` (the symptom; None: any) and before its
    end: a step checkpoint, or best.pt (best.dcp, sharded) when the rotation (trainer.keep_last)
    already removed the older ones."""
    steps = [(path, step_of(path)) for path in step_checkpoints(attempt_dir)]
    for best in best_checkpoints(attempt_dir):
        if best.exists():  # its step is inside it (a broken best.dcp link holds none)
            steps.append((best, int(load_checkpoint(best)["step"])))
    end = json.loads((attempt_dir / "summary.json").read_text())["max_steps"]  # a checkpoint there trains nothing
    before = [(path, step) for path, step in steps if 0 < step < end and (before_step is None or step < before_step)]
    return max(before, key=lambda found: found[1]) if before else None


def _attempt(number: int, overrides: list[str], restart: str, point: tuple[Path, int] | None) -> dict[str, Any]:
    return {"number": number, "overrides": overrides, "restart": restart,
            "restart_checkpoint": str(point[0]) if point else None, "restart_step": point[1] if point else None}


def _remedy_record(remedy: Remedy) -> dict[str, Any]:
    return {"overrides": list(remedy.overrides), "restart": remedy.restart.value, "why": remedy.why,
            "before_step": remedy.before_step, "kind": remedy.kind, "changes_model": remedy.changes_model}


def load_story(run_dir: Path) -> dict[str, Any] | None:
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


def write_top(run_dir: Path, story: dict[str, Any]) -> None:
    """RUN_DIR/summary.json: the best attempt's, with the story; RUN_DIR/report.md: the story, then
    the best attempt's report."""
    best = run_dir / ATTEMPTS / str(story["best_attempt"])
    summary = json.loads((best / "summary.json").read_text())
    summary.update(remedy_verdict=story["verdict"], best_attempt=story["best_attempt"],
                   attempts=copy.deepcopy(story["attempts"]), remedies_refused=copy.deepcopy(story.get("refused", [])))
    atomic_json_dump(summary, run_dir / "summary.json")
    lines = [f"# Remedies: {story['verdict']}", "",
             f"The run's result is attempt {story['best_attempt']}'s: the lowest best val loss among the run as "
             f"given and the remedies kept (a rejected remedy is never the result, however low it ended: it did not "
             f"beat its base where both had trained).", "",
             "| attempt | builds on | remedy applied | started | ended | steps | best val loss | outcome "
             "| critical findings |", "|---|---|---|---|---|---|---|---|---|"]
    for a in story["attempts"]:
        best_loss = "—" if a.get("best_val_loss") is None else f"{a['best_val_loss']:.4g}"
        applied = a.get("applied")
        search = SEARCH_NOTE.get(applied.get("search"), "") if applied else ""
        remedy = (f"`{' '.join(applied['overrides'])}`{search} for {applied['finding']}"
                  + (" (changes the model)" if applied.get("changes_model") else "")) if applied else (
            f"none: attempt {a['finishes']} to its end" if a.get("finishes") else "(as given)")
        lines.append(f"| [{a['number']}](attempts/{a['number']}/report.md) | {a.get('base') or '—'} | {remedy} | "
                     f"{a['restart']} | {a.get('status', '?')} | {a.get('steps', '?')} | {best_loss} | "
                     f"{a.get('outcome', '—')} | {', '.join(a.get('critical', [])) or 'none'} |")
    for refused in story.get("refused", []):
        lines.append(f"\nNot tried, refused by the config checks: `{' '.join(refused['overrides'])}` for "
                     f"{refused['finding']} ({refused['why']}).")
    report = best / "report.md"
    body = report.read_text() if report.is_file() else ""
    body = body.replace(PLOTS_PENDING, f"The best attempt's plots are drawn into `attempts/{best.name}/plots/`; "
                                       f"[its report](attempts/{best.name}/report.md) lists them when done.")
    (run_dir / "report.md").write_text("\n".join(lines) + "\n\n" + body.replace("](plots/",
                                                                                f"](attempts/{best.name}/plots/"))
