"""mode=eval: score a trained checkpoint on the whole validation split, and on the test split where
the data holds one, into RUN_DIR/eval.json.

Lightning's `trainer.test`, HF Trainer's `evaluate()`: a number measured after training, on every
validation sample (training's evals score a fixed sample of `trainer.eval_batches` batches), and
on test samples nothing was trained, validated or selected on. Without a test split eval.json
says `"test_samples": null` and the log says how to hold one out. The run's own files are left
as they were: the model is built in a scratch directory, and only eval.json (and eval.log) are
written into the run dir.

    python train.py mode=eval hydra.run.dir=outputs/exp1                       # checkpoints/best.pt
    python train.py mode=eval hydra.run.dir=outputs/exp1 eval.checkpoint=last  # the newest step checkpoint
    python train.py mode=eval hydra.run.dir=outputs/exp1 precision=bf16 batch_size=128  # faster, recorded
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from omegaconf import OmegaConf

from harness.assembly.assemble import Assembly, assemble, eval_batches, eval_stride
from harness.config.run_config import RunConfig
from harness.remedy.story import remedied_attempt
from harness.state.checkpoint import best_checkpoints, is_sharded_checkpoint, step_checkpoints, verified_checkpoint
from harness.state.files import atomic_json_dump
from harness.state.rundir import CKPT_DIR
from harness.state.run_dir_snapshot import accept_command
from harness.data import check_test_split
from harness.core.distributed import DistInfo
from harness.core.errors import ConfigError, Interrupted
from harness.core.metric_names import VAL_LOSS, flat

log = logging.getLogger("harness")
EVAL_FILE = "eval.json"
ALL_BATCHES = 10**9  # eval_indices takes every sample of a split smaller than the count asked for
SPLIT_WORDS = {"val": "validation", "test": "test"}
PROGRESS_EVERY_S = 2.0
HINT_AFTER_S = 10.0  # a split's estimated scoring time past which the faster form is named


def run_eval(config: RunConfig, run_dir: Path, device: torch.device, dist: DistInfo = DistInfo()) -> float:
    """Returns the validation loss over the whole split (what a sweep would take)."""
    choice = config.job.eval_checkpoint
    source = run_dir if choice in ("best", "last") else Path(choice)
    owner = source.parent.parent if source.parent.name == CKPT_DIR else source  # the run dir it belongs to
    remedied = remedied_attempt(owner)
    if remedied is not None:  # the attempt's own config: the run's, plus the remedies it applied
        folder, attempt = remedied
        source = folder if source == owner else source
        config = config.with_overrides(attempt.overrides, dist.world_size)
        if dist.is_main:
            log.info("mode=eval: %s is attempt %d of diagnose.remedy=auto%s: scored with its remedies (%s)",
                     folder, attempt.number, " (the run's result)" if folder != owner else "",
                     " ".join(attempt.overrides) or "none: the run as given")
    path, state = eval_checkpoint(choice, source)
    check_built_as_trained(state.get("config"), OmegaConf.to_container(config.record, resolve=True), path,
                           config.job.eval_other_model)
    # every validation sample; no tracker, no diagnosis: only the numbers
    whole = config.with_overrides([f"trainer.eval_batches={config.job.eval_batches or ALL_BATCHES}", "logger=none",
                                   "diagnose=false"], dist.world_size)
    scratch = Path(tempfile.mkdtemp(prefix="harness-eval-"))
    try:
        built = assemble(whole, scratch, device, resume_from=None, dist=dist, console=False)
        try:
            built.model_state.load_state_dict(state["model"])
            built.evaluator.progress = Progress(config.precision.name == "fp32") if dist.is_main else None
            measured = _scores(built, device)
        finally:
            built.close()
    except KeyboardInterrupt:
        raise Interrupted("mode=eval stopped by Ctrl-C; nothing was written (eval.batches=N or a larger "
                          "eval.stride scores fewer samples)") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result: dict[str, Any] = {"checkpoint": str(path), "step": int(state["step"]),
                              "whole_split": not config.job.eval_batches, "stride": measured.pop("stride"),
                              "precision": config.precision.name, "micro_batch": measured.pop("micro_batch"),
                              **measured}
    if remedied is not None:
        result.update(attempt=remedied[1].number, remedies=remedied[1].overrides)
    accept_command()
    if dist.is_main:
        atomic_json_dump(result, run_dir / EVAL_FILE)
        _log_result(result, path, config.data.name, run_dir / EVAL_FILE)
    return result[flat(VAL_LOSS)]


def _scores(built: Assembly, device: torch.device) -> dict[str, Any]:
    """The val metrics and sample count, then the test split's (`test_samples` null without one)."""
    evaluator = built.evaluator
    evaluator.train_batches = None  # training samples in eval mode: a training-time check only
    measured = {flat(name): value for name, value in evaluator.evaluate().items()}
    scores: dict[str, Any] = {"val_samples": evaluator.prior["eval_samples"], **measured, "test_samples": None,
                              "stride": eval_stride(built.config, built.val_set), "micro_batch": built.micro_batch}
    test_set = built.test_set
    if test_set is None:
        return scores
    check_test_split(built.config.data, test_set, built.meta)
    loader = built.config.data.loading.settings(device.type)
    batches, sample = eval_batches(built.config, test_set, built.recipe, loader,
                                   built.micro_batch, built.dist, split="test")
    try:
        tested = evaluator.test(batches)
    finally:
        batches.close()
    return {**scores, "test_samples": len(sample), **{flat(name): value for name, value in tested.items()}}


def _log_result(result: dict[str, Any], path: Path, data_name: str, written: Path) -> None:
    which = "the first" if not result["whole_split"] else "all"
    every = f" (every {result['stride']}th)" if result["stride"] > 1 else ""

    def scored(split: str) -> str:
        accuracy = result.get(f"{split}_accuracy")
        return (f"{which} {result[f'{split}_samples']} {SPLIT_WORDS[split]} samples{every}: loss "
                f"{result[f'{split}_loss']:.4f}" + (f", accuracy {accuracy:.4f}" if accuracy is not None else ""))

    tested = f"; on {scored('test')}" if result["test_samples"] is not None else ""
    precision = f" in {result['precision']}" if result["precision"] != "fp32" else ""
    log.info("eval of %s (step %d)%s on %s%s -> %s", path, result["step"], precision, scored("val"), tested, written)
    if result["test_samples"] is None:
        log.info("no test split: data=%s holds none (built-in data holds one out with data.test_fraction; a custom "
                 "factory may return (train, val, test); data=hf reads data.test_split, data=tokens DIR/test.bin)",
                 data_name)


class Progress:
    """A line every few seconds while a split is scored: how far, and how long until done; in fp32,
    once, the faster form when the split will take a while."""

    def __init__(self, full_precision: bool = False) -> None:
        self.every_s, self.split, self.started, self.shown = PROGRESS_EVERY_S, "", 0.0, 0.0
        self.hint = full_precision

    def __call__(self, split: str, done: int, total: int) -> None:
        now = time.monotonic()
        if split != self.split:
            self.split, self.started, self.shown = split, now, now
        if now - self.shown >= self.every_s and done < total:
            self.shown = now
            left = (now - self.started) / done * (total - done)
            log.info("eval: %s batch %d/%d (%.0f%%), about %s left", SPLIT_WORDS.get(split, split), done, total,
                     100 * done / total, _duration(left))
            if self.hint and now - self.started + left > HINT_AFTER_S:
                self.hint = False
                log.info("eval: precision=bf16 batch_size=128 scores faster on a GPU or a CPU with bf16 units (the "
                         "loss moves in about the 5th digit; eval.json records both)")


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(round(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


BUILDS_THE_MODEL = ("model", "activation_swap", "output_activation")  # the keys that decide the modules built
SHOWN_DIFFERENCES = 3


def check_built_as_trained(saved: dict[str, Any] | None, composed: dict[str, Any], path: Path,
                           other_model: bool = False) -> None:
    """The model this command builds is the one the checkpoint was trained with: another one (a
    remedy's attempt scored with the run's own config, a mistyped override) is refused in one line
    naming both, before anything is built or written; with `other_model` (eval.other_model=true:
    the same parameters read by another class or head, on purpose) it is scored, and the
    differences are logged."""
    if saved is None:  # a checkpoint from before configs were recorded: loading it tells
        return
    differences = [f"{key}: {theirs!r} in the checkpoint, {ours!r} here"
                   for top in BUILDS_THE_MODEL for key, theirs, ours in _differences(top, saved.get(top), composed.get(top))]
    if differences:
        shown = "; ".join(differences[:SHOWN_DIFFERENCES]) + ("; ..." if len(differences) > SHOWN_DIFFERENCES else "")
        if other_model:
            log.warning("mode=eval: %s was trained with another model (%s); scored as eval.other_model=true asks",
                        path, shown)
            return
        raise ConfigError("eval.checkpoint", str(path), f"a checkpoint of the model this command builds: it was trained "
                                                        f"with another ({shown}); score it with the overrides it was "
                                                        f"trained with (its run dir's, or the attempt's), or "
                                                        f"eval.other_model=true")


def _differences(key: str, theirs: Any, ours: Any) -> list[tuple[str, Any, Any]]:
    """(dotted key, checkpoint's value, this command's value) of every leaf that differs."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        return [d for name in sorted(set(theirs) | set(ours), key=str)
                for d in _differences(f"{key}.{name}", theirs.get(name), ours.get(name))]
    return [] if theirs == ours else [(key, theirs, ours)]


def eval_checkpoint(choice: str, source: Path) -> tuple[Path, dict[str, Any]]:
    """`best` (checkpoints/best.pt, or best.dcp), `last` (the newest step checkpoint), or a path:
    a checkpoint, or a run dir (its best); `source` is the checkpoint or run dir it names. Verified
    like a resume's."""
    if source.is_file() or is_sharded_checkpoint(source):
        candidates = [source]
    elif choice == "last":
        candidates = step_checkpoints(source)[:1]
    else:
        candidates = best_checkpoints(source)
    if not candidates:
        raise ConfigError("eval.checkpoint", choice, f"best, last or a checkpoint path; {source} holds no "
                                                     f"{'step' if choice == 'last' else 'best'} checkpoint (train it "
                                                     f"first, or name a checkpoint file)")
    state, problem = verified_checkpoint(candidates[0])
    if state is None:
        raise ConfigError("eval.checkpoint", choice, f"a checkpoint that can be trusted: {candidates[0]} is {problem}")
    return candidates[0], state
