"""`diagnose.remedy=auto`: a run that the diagnosis calls sick starts again with a fix its finding
names, keeps the fix only when the run measurably improved, and ends with its best attempt.

Each attempt is a complete run dir, RUN_DIR/attempts/N/ (config, metrics, checkpoints, report).
An attempt ends when a critical finding that carries remedies appears (live, at an eval: the
attempt runs with `diagnose.abort_on=remedy`) or when it finishes. Which attempt follows is the
policy's (policy.py), whether it is kept the judge's (judge.py). After `max_attempts` remedies, or
when no candidate is left, the run ends with its best attempt (the run as given and the best
attempt, where the live diagnosis stopped them early, are first trained to their end):
RUN_DIR/summary.json is that attempt's (plus the story, report.py), and so is the objective a sweep
gets. The verdict:
`healthy` (nothing to remedy), `healed` (the best attempt is a remedied one, better than the
first, with no critical finding, whose own evals say it learned: clearly below the untrained model
and the prior, and for classification an accuracy clearly above guessing),
`unchanged` (no remedy beat the run as given), `sick` (better, but still sick), `needs a code change`
(the run as given has a cause in the user's own code that no override reaches: nothing is tried;
beside a latent one, such as a log that meets 0 only once a probability underflows, the other
findings' remedies are tried, and the verdict is this one only where none was).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from harness.config.run_config import RunConfig
from harness.core.distributed import DistInfo, barrier, broadcast_object
from harness.core.errors import ConfigError
from harness.core.metric_names import VAL_LOSS
from harness.diagnosis import diagnose, load_run
from harness.diagnosis.findings import Severity
from harness.diagnosis.rules.code import code_lines
from harness.remedy.judge import better, conclude, learned, log_noise, rejudge_at_the_end
from harness.remedy.policy import finish_best, next_attempt
from harness.remedy.report import write_top
from harness.remedy.story import KEPT, REJECTED, STORY, Attempt, Story, attempt_dir, load_story, save_story
from harness.state.checkpoint import checkpoint_problem, copy_checkpoint, step_checkpoints
from harness.state.rundir import CKPT_DIR, stored_objective

log = logging.getLogger("harness")

TrainOne = Callable[[RunConfig, Path], Any]  # trains one attempt's config in its run dir; returns the objective


def run_attempts(config: RunConfig, run_dir: Path, train_one: TrainOne, dist: DistInfo = DistInfo()) -> Any:
    """Train attempt after attempt until no remedy is left to try. Under torchrun every rank trains
    each attempt; rank 0 judges it and writes the story, and every rank follows its verdict."""
    settings = config.diagnose
    story = load_story(run_dir) if config.job.resume == "auto" else None
    if story is None:
        story = Story.start(settings.max_attempts)
    elif story.verdict is not None:
        log.info("%s: the remedies are done (%s); nothing was changed", run_dir, story.verdict)
        return stored_objective(attempt_dir(run_dir, story.best_attempt or len(story.attempts)))
    while story.verdict is None:
        attempt = story.attempts[-1]
        if dist.is_main:
            save_story(run_dir, story)  # before it starts: a kill from here on resumes this attempt
        train_one(attempt_config(config, attempt, attempt_dir(run_dir, attempt), dist), attempt_dir(run_dir, attempt))
        barrier(dist)  # rank 0's summary.json and metrics are complete
        if dist.is_main:
            _judge(config, story, run_dir, settings.remedy_scope, dist.world_size)
        story = broadcast_object(story, dist)
    if dist.is_main:
        save_story(run_dir, story)
        write_top(run_dir, story)
    barrier(dist)
    return stored_objective(attempt_dir(run_dir, story.best_attempt))


def _judge(config: RunConfig, story: Story, run_dir: Path, scope: str, world_size: int) -> None:
    """The attempt that just ended: its outcome against the attempt it builds on, then the next
    attempt (the next untried candidate of the finding in question) or the verdict."""
    attempt = story.attempts[-1]
    run = load_run(attempt_dir(run_dir, attempt))
    findings = diagnose(run)
    summary = run.summary
    attempt.status, attempt.steps, attempt.best_val_loss = summary["status"], summary["steps"], summary["best_val_loss"]
    attempt.best_val_accuracy, attempt.final_train_loss = summary.get("best_val_accuracy"), summary["final_train_loss"]
    attempt.critical = [f.name for f in findings if f.severity is Severity.CRITICAL]
    if config.trainer.monitor != VAL_LOSS:  # the user measures the run by another value: the result follows it
        attempt.monitor = summary.get("monitor")
    attempt.learned = learned(run)
    attempt.code = code_lines(run) or None
    if attempt.base is None and code_lines(run, latent=False):  # a cause in the user's code that no override
        _finish_or_conclude(story, run_dir)  # reaches and that keeps the run from training: nothing is tried,
        return  # and the run as given, if its live finding stopped it, is trained to its end
    base = story.attempt(attempt.base)
    if base is not None:
        cleared = bool(base.critical) and not attempt.critical
        attempt.outcome = KEPT if better(run, load_run(attempt_dir(run_dir, base)), cleared) else REJECTED
    current = attempt if base is None or attempt.outcome == KEPT else base
    current_dir = attempt_dir(run_dir, current)
    if current is not attempt:  # set aside: the next candidate starts where this one did
        findings = diagnose(load_run(current_dir))
    following = None
    if attempt.finishes is not None:  # a stopped attempt, finished: only another stopped one may follow
        rejudge_at_the_end(story, attempt, log_noise(run.series(VAL_LOSS, kind="eval")))
    elif story.remedies_applied < story.max_attempts:
        following = next_attempt(config, story, attempt, current, current_dir, findings, scope, world_size)
    if following is None:
        _finish_or_conclude(story, run_dir)
        return
    story.attempts.append(following)
    applied = following.applied
    found = f"found {applied.finding}" if not applied.search else "ended"
    log.warning("remedy: attempt %d (%s) %s; attempt %d starts %s with %s%s", attempt.number,
                attempt.outcome or "as given", found, following.number, following.restart,
                " ".join(applied.overrides), f" ({applied.why})" if applied.search else "")


def _finish_or_conclude(story: Story, run_dir: Path) -> None:
    """No remedy follows: an attempt the live diagnosis stopped early is continued to its end
    (`finish_best`), else the story ends with its verdict."""
    following = finish_best(story, run_dir)
    if following is None:
        conclude(story)
        return
    story.attempts.append(following)
    log.warning("remedy: no remedy left to try; attempt %d continues attempt %d, stopped early by its finding, "
                "to its end", following.number, following.finishes)


def attempt_config(config: RunConfig, attempt: Attempt, run_dir: Path, dist: DistInfo = DistInfo()) -> RunConfig:
    """The run's config with this attempt's remedies applied; it resumes whatever its dir holds (a
    checkpoint copied from the attempt before by rank 0, or its own after a kill)."""
    remedied = config.with_overrides(attempt.overrides, dist.world_size)
    if dist.is_main and attempt.restart_checkpoint:
        _place_restart_checkpoint(attempt, run_dir)
    barrier(dist)  # the copy is in place before any rank looks for it
    stops_for_remedies = remedied.diagnose.live and attempt.finishes is None  # the last one runs to its end
    changes = [*(["resume=auto"] if attempt.number > 1 else []),
               *(["diagnose.abort_on=remedy"] if stops_for_remedies and remedied.diagnose.abort_on is None else [])]
    return remedied.with_overrides(changes, dist.world_size)


def _place_restart_checkpoint(attempt: Attempt, run_dir: Path) -> None:
    """Copy the checkpoint the story starts this attempt from into its dir, once (also after a kill:
    a resume finds the attempt's own checkpoints), atomically. A story whose checkpoint is gone or
    damaged, with no whole checkpoint of the attempt's own, is refused rather than run from scratch."""
    if any(checkpoint_problem(path) is None for path in step_checkpoints(run_dir)):
        return
    source = Path(attempt.restart_checkpoint).resolve()  # best.dcp is a link to its directory
    problem = checkpoint_problem(source)
    if problem is not None:
        raise ConfigError("resume", "auto", f"a run whose {STORY} and checkpoints agree: attempt {attempt.number} "
                                            f"starts {attempt.restart}, and {source} is {problem}")
    (run_dir / CKPT_DIR).mkdir(parents=True, exist_ok=True)
    copy_checkpoint(source, run_dir / CKPT_DIR / f"step_{attempt.restart_step:08d}{source.suffix}")
