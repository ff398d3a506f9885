"""Process-group facts for torchrun launches; a single process is world size 1, rank 0."""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

from harness.core.shards import is_fsdp_module


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def dist_info_from_env() -> DistInfo:
    """torchrun sets RANK / LOCAL_RANK / WORLD_SIZE for every process it starts."""
    return DistInfo(
        rank=int(os.environ.get("RANK", 0)),
        local_rank=int(os.environ.get("LOCAL_RANK", 0)),
        world_size=int(os.environ.get("WORLD_SIZE", 1)),
    )


def init_process_group(info: DistInfo, device: torch.device, single: bool = False) -> None:
    """torchrun's ranks join their group; `single`: a group of one for a lone process that needs
    one all the same (parallel=fsdp in one process shards over a one-rank mesh)."""
    if dist.is_initialized() or not (info.enabled or single):
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    if info.enabled:
        dist.init_process_group(backend=backend)
    else:
        dist.init_process_group(backend=backend, store=dist.HashStore(), rank=0, world_size=1)


def barrier(info: DistInfo) -> None:
    """Wait for every rank. Before teardown: a gloo rank that destroys its process group while a
    peer is still working aborts ("terminate called without an active exception")."""
    if info.enabled:
        dist.barrier()


def destroy_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def all_reduce_mean(t: torch.Tensor, info: DistInfo) -> torch.Tensor:
    if info.enabled:
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        t /= info.world_size
    return t


def all_reduce_min(t: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """For agreement flags: any rank's 0 (bad) makes it 0 (bad) on all ranks."""
    if info.enabled:
        t = t.clone()
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
    return t


def all_gather_objects(obj: object, info: DistInfo) -> list:
    """Every rank's `obj`, in rank order (a collective: all ranks must call it)."""
    if not info.enabled:
        return [obj]
    gathered: list = [None] * info.world_size
    dist.all_gather_object(gathered, obj)
    return gathered


def broadcast_object(obj: object, info: DistInfo) -> object:
    """Rank 0's `obj` on every rank (a collective: all ranks must call it)."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def any_rank(flag: bool, info: DistInfo, device: torch.device) -> bool:
    """True on every rank when it is True on at least one (a collective)."""
    if not info.enabled:
        return flag
    t = torch.tensor(float(flag), device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def gradient_sync(model: nn.Module, sync: bool) -> contextlib.AbstractContextManager:
    """DDP all-reduces (FSDP reduce-scatters) gradients in backward; skip that on all but the
    last micro-batch, whose backward reduces what the earlier ones accumulated."""
    if is_fsdp_module(model):
        model.set_requires_gradient_sync(sync)
    if sync or not isinstance(model, nn.parallel.DistributedDataParallel):
        return contextlib.nullcontext()
    return model.no_sync()
