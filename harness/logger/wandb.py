"""Weights & Biases (logger=wandb): the resolved config, metrics at the logged steps, summary.json
and report.md as files, and a group per sweep.

With no API key (or no network) it runs offline: the run is written under RUN_DIR/wandb and
`wandb sync RUN_DIR/wandb/offline-run-*` uploads it later. A resumed run continues the same W&B
run (its id is kept in the run dir) from the step after the last one it logged.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from typing import Any

from harness.logger.base import FAILED_STATUSES, RunInfo, Sink
from harness.core.typed_config import one_of, setting

MODES = ("auto", "online", "offline", "disabled")
RUN_FILE = "wandb_run.json"  # in the run dir: which W&B run a resume continues
FILES = ("summary.json", "report.md")


@dataclass(frozen=True)
class WandbSettings:
    project: str = setting("stable-harness", "a W&B project name")
    entity: str | None = setting(None, "null (your default entity) or a W&B team or user")
    mode: str = setting("auto", f"one of {list(MODES)} (auto: online when WANDB_API_KEY is set, else offline)",
                        one_of(MODES))


def resolved_mode(mode: str) -> str:
    if mode != "auto":
        return mode
    return os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")


class WandbSink(Sink):
    def __init__(self, info: RunInfo, settings: WandbSettings) -> None:
        import wandb

        self.info = info
        saved = info.run_dir / RUN_FILE
        earlier = json.loads(saved.read_text()) if info.resume_step and saved.is_file() else {}
        run_id = earlier.get("run_id") or uuid.uuid4().hex[:8]
        self.logged_through = earlier.get("logged_through", -1)  # the earlier invocations' steps
        self.last_step = self.logged_through
        self.run = wandb.init(project=settings.project, entity=settings.entity, mode=resolved_mode(settings.mode),
                              dir=str(info.run_dir), id=run_id, resume="allow", name=info.run_dir.name,
                              group=info.study, job_type="trial" if info.study else "train",
                              config={k: v for k, v in info.config.items() if k != "hydra"},
                              tags=[f"trial-{info.trial}"] if info.trial is not None else None,
                              settings=wandb.Settings(silent=True, console="off"), reinit="create_new")
        self.run_id = run_id
        self._save()

    def _save(self) -> None:
        (self.info.run_dir / RUN_FILE).write_text(json.dumps({"run_id": self.run_id, "logged_through": self.last_step}))

    def log(self, step: int, scalars: dict[str, float], kind: str) -> None:
        if step <= self.logged_through:  # logged before the crash this run resumed from
            return
        self.run.log(dict(scalars), step=step)
        if step > self.last_step:
            self.last_step = step
            self._save()

    def finish(self, summary: dict[str, Any]) -> None:
        import wandb

        for name in FILES:
            path = self.info.run_dir / name
            if path.is_file():
                artifact = wandb.Artifact(f"{self.info.run_dir.name}-{path.stem}", type="run-file")
                artifact.add_file(str(path))
                self.run.log_artifact(artifact)
        self.run.summary["status"] = summary.get("status", "failed")
        self.run.finish(exit_code=1 if summary.get("status") in FAILED_STATUSES else 0)
        # W&B's service writes the run's files; a finished run's process ends without atexit
        # handlers (entry/cli.py's exit_without_teardown), so wait for it here.
        wandb.teardown()
