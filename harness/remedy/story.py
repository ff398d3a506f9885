"""The remedy story: the attempts a run made, what each applied and how it ended, and the verdict.

RUN_DIR/attempts.json holds it, written before each attempt starts, so `resume=auto` after a kill
continues the attempt that was running. Its JSON leaves out what an attempt has not got yet (no
outcome before it is judged, nothing applied to the run as given); summary.json's `attempts` is
the same list.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.core.errors import ConfigError
from harness.diagnosis.findings import Remedy
from harness.state.files import atomic_json_dump

STORY = "attempts.json"
ATTEMPTS = "attempts"  # RUN_DIR/attempts/N/: attempt N's run dir
FURTHER, MIDPOINT = "further", "midpoint"  # the LR search's steps: the same factor again; half of an overshoot
KEPT, REJECTED = "kept", "rejected"
CODE_CHANGE = "needs a code change"  # the verdict when the run as given has a cause only an edit reaches
KEPT_AT_THE_END = "kept at the end"  # rejected where its base stopped early, better once the base was finished
JUDGED = ("status", "steps", "best_val_loss", "best_val_accuracy", "final_train_loss", "critical", "learned")


@dataclass
class Applied:
    """The remedy an attempt applied on top of the attempt it builds on, and the finding that named it."""

    finding: str
    overrides: list[str]
    restart: str | None = None  # a Restart's value: from a checkpoint or from scratch
    why: str = ""
    before_step: int | None = None
    kind: str | None = None
    changes_model: bool = False
    search: str | None = None  # FURTHER or MIDPOINT: a step of the LR search, not a finding's candidate

    @classmethod
    def of(cls, finding: str, remedy: Remedy, search: str | None = None) -> Applied:
        return cls(finding, list(remedy.overrides), remedy.restart.value, remedy.why, remedy.before_step,
                   remedy.kind, remedy.changes_model, search)

    @property
    def idea(self) -> str:
        return idea_of(self.kind, self.overrides)


def idea_of(kind: str | None, overrides: Sequence[str]) -> str:
    """What counts as the same remedy twice: its kind (a second LR cut is not a new idea), else its overrides."""
    return kind or " ".join(overrides)


@dataclass
class Attempt:
    """One attempt: its config (the run's, plus `overrides`), where it starts, and once it has
    trained, how it ended and whether it beat the attempt it builds on (`outcome`)."""

    number: int
    overrides: list[str]
    restart: str  # "as given", "from scratch", "from step N of attempt M", ...
    restart_checkpoint: str | None = None
    restart_step: int | None = None
    base: int | None = None  # the attempt it builds on
    applied: Applied | None = None
    finishes: int | None = None  # continues that attempt, stopped early by its finding, to its end
    status: str | None = None
    steps: int | None = None
    best_val_loss: float | None = None
    best_val_accuracy: float | None = None
    final_train_loss: float | None = None
    critical: list[str] | None = None  # its critical findings, once judged
    learned: bool | None = None
    outcome: str | None = None  # KEPT, REJECTED or KEPT_AT_THE_END; None for the run as given
    monitor: dict[str, Any] | None = None  # summary.json's `monitor` where the user named one (val/f1, ...)
    code: list[str] | None = None  # FILE:LINE of causes in the user's code that no override reaches

    @property
    def kept(self) -> bool:
        return self.outcome in (KEPT, KEPT_AT_THE_END)

    def to_json(self) -> dict[str, Any]:
        always = ("restart_checkpoint", "restart_step", *(JUDGED if self.status is not None else ()))
        data = {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None or f.name in always}
        if self.applied is not None:
            data["applied"] = {k: v for k, v in asdict(self.applied).items() if v is not None or k != "search"}
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Attempt:
        applied = data.get("applied")
        known = {f.name for f in fields(cls)} - {"applied"}
        return cls(**{k: v for k, v in data.items() if k in known},
                   applied=None if applied is None else Applied(**applied))


@dataclass
class Refusal:
    """A remedy a finding named that the config checks refused: recorded, not tried."""

    finding: str
    overrides: list[str]
    why: str


@dataclass
class Story:
    max_attempts: int
    attempts: list[Attempt]
    verdict: str | None = None  # healthy, healed, unchanged, sick or CODE_CHANGE, once no remedy is left
    best_attempt: int | None = None
    refused: list[Refusal] = field(default_factory=list)

    @classmethod
    def start(cls, max_attempts: int) -> Story:
        return cls(max_attempts, [Attempt(1, [], "as given")])

    def attempt(self, number: int | None) -> Attempt | None:
        return None if number is None else self.attempts[number - 1]

    @property
    def remedies_applied(self) -> int:
        return sum(1 for a in self.attempts if a.applied is not None)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"max_attempts": self.max_attempts, "attempts": [a.to_json() for a in self.attempts],
                                "verdict": self.verdict}
        if self.best_attempt is not None:
            data["best_attempt"] = self.best_attempt
        if self.refused:
            data["refused"] = [asdict(r) for r in self.refused]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Story:
        return cls(data["max_attempts"], [Attempt.from_json(a) for a in data["attempts"]], data.get("verdict"),
                   data.get("best_attempt"), [Refusal(**r) for r in data.get("refused", [])])


def attempt_dir(run_dir: Path, attempt: Attempt | int) -> Path:
    return run_dir / ATTEMPTS / str(attempt if isinstance(attempt, int) else attempt.number)


def load_story(run_dir: Path, asked_by: tuple[str, str] = ("resume", "auto")) -> Story | None:
    """The run dir's story, None without one; `asked_by` is the key and value an unreadable one is
    refused under."""
    path = run_dir / STORY
    if not path.is_file():
        return None
    try:
        return Story.from_json(json.loads(path.read_text()))
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ConfigError(*asked_by, f"a run dir whose {STORY} is readable ({err})") from None


def remedied_attempt(run_dir: Path) -> tuple[Path, Attempt] | None:
    """The attempt a remedied run's dir stands for, with that attempt's dir: the run's result (its
    best attempt) for RUN_DIR, attempt N for RUN_DIR/attempts/N; None where no remedies ran."""
    key = ("hydra.run.dir", str(run_dir))
    if run_dir.parent.name == ATTEMPTS and (run_dir.parent.parent / STORY).is_file():
        root = run_dir.parent.parent
        story = load_story(root, key)
        if not run_dir.name.isdigit() or not 1 <= int(run_dir.name) <= len(story.attempts):
            raise ConfigError(*key, f"an attempt dir of {root}: {ATTEMPTS}/1 to {ATTEMPTS}/{len(story.attempts)}")
        return run_dir, story.attempts[int(run_dir.name) - 1]
    story = load_story(run_dir, key)
    if story is None:
        return None
    if story.verdict is None:
        raise ConfigError(*key, f"a remedied run whose remedies have ended: attempt {len(story.attempts)} has not "
                                f"(resume=auto finishes it), or score an attempt that has: "
                                f"hydra.run.dir={attempt_dir(run_dir, 1)}")
    best = story.attempt(story.best_attempt or len(story.attempts))
    return attempt_dir(run_dir, best), best


def save_story(run_dir: Path, story: Story) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_json_dump(story.to_json(), run_dir / STORY)
