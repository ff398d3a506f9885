"""Checkpoints of a sharded model (parallel=fsdp), through torch.distributed.checkpoint (DCP).

Layout of RUN_DIR/checkpoints/ (besides the .pt files of unsharded runs):
  step_00000200.dcp/   one directory per step checkpoint: DCP's files, where every rank wrote
                       its own shards of the model and optimizer, plus state.pt (rank 0: the rest
                       of the training state, small and the same on every rank)
  best.dcp             a link to best_00000150.dcp/, the state at the lowest validation loss
Every rank writes into a temporary directory; once all have finished, rank 0 renames it into
place (a step checkpoint) or swaps the `best.dcp` link over (best), so a crash at any instant
leaves every earlier checkpoint whole. DCP reshards on load: a checkpoint written by 2 ranks
loads on 1, or on 4, and into an unsharded model too (parallel=none or ddp).
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from harness.state.checkpoint import (SHARDED_KEYS, SHARDED_STATE, SHARDED_SUFFIX, Shards, atomic_torch_save,
                                      raise_if_any_failed, step_checkpoints)
from harness.state.files import fsync_dir
from harness.state.checksums import file_sums, write_manifest
from harness.core.distributed import DistInfo, all_gather_objects
from harness.core.errors import WriteError, one_line, write_error
from harness.state.rundir import BEST_LINK, CKPT_DIR
from harness.core.shards import sharded


FULL_BELOW_BYTES = 1 << 20  # a write that failed with less free space than this failed for want of it


def _dcp() -> Any:
    """torch.distributed.checkpoint, imported on first use: a run that shards nothing and resumes no
    .dcp checkpoint never pays its import (nor torch.distributed.tensor's, ~0.7 s: see shards.py)."""
    import torch.distributed.checkpoint as dcp

    return dcp


def _helpers() -> Any:
    """DCP's state-dict helpers (fully qualified names, DTensor shards), imported on first use."""
    from torch.distributed.checkpoint import state_dict

    return state_dict


class ModelState:
    """The model's entry of a checkpoint: its own state dict (unsharded runs, today's files), or
    DCP's sharded one (fsdp); loads either kind into any layout."""

    def __init__(self, model: nn.Module, sharded: bool) -> None:
        self.model, self.sharded = model, sharded

    def state_dict(self) -> dict[str, Any]:
        return _helpers().get_model_state_dict(self.model) if self.sharded else self.model.state_dict()

    def load_state_dict(self, value: Any) -> None:
        if not (self.sharded or isinstance(value, Shards)):
            self.model.load_state_dict(value)  # an unsharded run's own entry
            return
        api = _helpers()
        if isinstance(value, Shards):
            value = _read(value, api.get_model_state_dict(self.model))
        whole = self.sharded and not _sharded_values(value)  # an unsharded run's .pt into shards
        api.set_model_state_dict(self.model, value, options=api.StateDictOptions(full_state_dict=whole))


class OptimizerState:
    """The optimizer's entry, keyed by parameter name when sharded (DCP matches entries by name)."""

    def __init__(self, model: nn.Module, optimizer: torch.optim.Optimizer, sharded: bool) -> None:
        self.model, self.optimizer, self.sharded = model, optimizer, sharded

    def state_dict(self) -> dict[str, Any]:
        if not self.sharded:
            return self.optimizer.state_dict()
        if not self.optimizer.state:
            # Before the first update there is nothing to shard, and get_optimizer_state_dict would
            # create the state with a zero-LR step(): AdamW's step count would then be one ahead.
            return {"state": {}, "param_groups": []}
        return _helpers().get_optimizer_state_dict(self.model, self.optimizer)

    def load_state_dict(self, value: Any) -> None:
        from_shards = isinstance(value, Shards)
        if not (self.sharded or from_shards):
            self.optimizer.load_state_dict(value)  # an unsharded run's own entry
            return
        if not (_holds_state(value.path) if from_shards else value["state"]):
            self.optimizer.state.clear()  # a checkpoint from before the first update; the config's groups stand
            return
        api = _helpers()
        if from_shards:  # the live layout to read into (a fresh optimizer's state is created first)
            value = _read(value, api.get_optimizer_state_dict(self.model, self.optimizer))
        whole = self.sharded and not _sharded_values(value["state"])  # an unsharded run's .pt into shards
        if whole:
            value = _by_name(self.model, self.optimizer, value)
        api.set_optimizer_state_dict(self.model, self.optimizer, value,
                                     options=api.StateDictOptions(full_state_dict=whole))


def _sharded_values(state: dict[str, Any]) -> bool:
    """Whether a state dict holds DTensors (a sharded run's) rather than whole tensors."""
    leaves = [v for value in state.values() for v in (value.values() if isinstance(value, dict) else [value])]
    return sharded(leaves)


def _by_name(model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> dict[str, Any]:
    """torch's optimizer.state_dict() numbers parameters in param-group order; DCP's helpers name them."""
    names = {id(p): name for name, p in model.named_parameters()}
    order = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    return {"state": {order[i]: v for i, v in state["state"].items()},
            "param_groups": [{**g, "params": [order[i] for i in g["params"]]} for g in state["param_groups"]]}


def _holds_state(path: Path) -> bool:
    """Whether a sharded checkpoint holds optimizer state (not one taken before the first update)."""
    keys = _dcp().FileSystemReader(str(path)).read_metadata().state_dict_metadata
    return any(key.startswith("optimizer.state.") for key in keys)


def _read(shards: Shards, target: dict[str, Any]) -> dict[str, Any]:
    """Fill `target` (the live layout: sharded or whole tensors) from the checkpoint; DCP reshards."""
    wrapped = {shards.key: target}
    _dcp().load(wrapped, checkpoint_id=str(shards.path))
    return wrapped[shards.key]


class ShardedCheckpoints:
    """Step and best checkpoints written by every rank together (all ranks call both)."""

    def __init__(self, dist_info: DistInfo) -> None:
        self.dist = dist_info

    def step(self, state: dict[str, Any], run_dir: Path, step: int, keep_last: int) -> None:
        path = run_dir / CKPT_DIR / f"step_{step:08d}{SHARDED_SUFFIX}"
        self._write(state, path)
        if self.dist.is_main:
            for old in step_checkpoints(run_dir)[max(keep_last, 1):]:
                shutil.rmtree(old) if old.is_dir() else old.unlink(missing_ok=True)

    def best(self, state: dict[str, Any], run_dir: Path) -> None:
        folder = run_dir / CKPT_DIR
        target = f"best_{state['step']:08d}{SHARDED_SUFFIX}"
        self._write(state, folder / target)
        error = None
        if self.dist.is_main:
            link = folder / BEST_LINK
            try:
                _point_link(link, target)
            except OSError as err:
                shutil.rmtree(folder / target, ignore_errors=True)
                error = write_error(link, err)
        raise_if_any_failed(error, self.dist)

    def _write(self, state: dict[str, Any], path: Path) -> None:
        """Every rank writes its shards into a temporary directory, and the sizes and checksums of
        its own files; rank 0 adds the rest of the state and the manifest, then renames it into place.
        A write that fails on any rank removes the temporary directory and stops every rank."""
        tmp = path.with_name(f".{path.name}.tmp")
        if self.dist.is_main:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        _barrier(self.dist)
        sums, error = {}, None
        try:
            _dcp().save({key: state[key] for key in SHARDED_KEYS}, checkpoint_id=str(tmp))
            sums = file_sums(tmp, [p.name for p in tmp.glob(f"__{self.dist.rank}_*")])
            if self.dist.is_main:
                atomic_torch_save({k: v for k, v in state.items() if k not in SHARDED_KEYS}, tmp / SHARDED_STATE)
        except WriteError as err:
            error = err
        except (OSError, _dcp().api.CheckpointException) as err:  # DCP reports each rank's failure
            error = write_error(path, _os_error(err, tmp))
        try:
            raise_if_any_failed(error, self.dist)
        except WriteError:
            shutil.rmtree(tmp, ignore_errors=True)  # every rank: whichever gets there first removes it
            raise
        every = {name: value for rank_sums in all_gather_objects(sums, self.dist) for name, value in rank_sums.items()}
        error = None
        if self.dist.is_main:
            try:
                write_manifest(tmp, {**every, **file_sums(tmp, [".metadata", SHARDED_STATE])})
                if path.exists():  # the same step again (a stop right after a periodic checkpoint): replace it
                    shutil.rmtree(path)
                os.replace(tmp, path)
                fsync_dir(path.parent)
            except OSError as err:
                shutil.rmtree(tmp, ignore_errors=True)
                error = write_error(path, err)
        raise_if_any_failed(error, self.dist)


def _point_link(link: Path, target: str) -> None:
    """Move `link` to `target` in one step (best.dcp is always a whole checkpoint) and drop the
    checkpoint it pointed to before."""
    before = os.readlink(link) if link.is_symlink() else None
    tmp = link.with_name(f".{link.name}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(target)
    os.replace(tmp, link)
    fsync_dir(link.parent)
    if before and before != target:
        shutil.rmtree(link.parent / before, ignore_errors=True)


def _os_error(err: BaseException, folder: Path) -> OSError:
    """The OSError behind a failed DCP save. Its CheckpointException carries each rank's exception,
    where torch's own writer often reports a full disk as `[enforce fail ...] unexpected pos`: then
    the file system's free space tells."""
    causes = [err, *(failure[0] for failure in getattr(err, "failures", {}).values())]
    found = next((cause for cause in causes if isinstance(cause, OSError)), None)
    if found is not None:
        return found
    try:
        stats = os.statvfs(folder.parent)
        if stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES:
            return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    except OSError:
        pass
    return OSError(0, one_line(causes[-1], 200))


def _barrier(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.barrier()
