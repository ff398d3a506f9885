"""Norms of tensors that may be sharded (FSDP's DTensor parameters and gradients, split by rows
over the ranks): computed on each rank's local rows, then added up over the ranks in one
collective, so a per-tensor norm costs one reduction for all tensors, not one each. Plain
tensors take the same path with no collective at all.

torch.distributed.tensor takes ~0.7 s to import on 2 cores, so nothing here imports it: a DTensor
(or an FSDP module) can only exist once torch has loaded its module, and a run that shards
nothing never does.
"""
from __future__ import annotations

import sys
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


def _loaded(module: str, name: str) -> Any:
    """`module.name` if torch has imported `module` already, else None."""
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def is_dtensor(t: object) -> bool:
    cls = _loaded("torch.distributed.tensor", "DTensor")
    return cls is not None and isinstance(t, cls)


def fsdp_module_class() -> type | None:
    """FSDP2's FSDPModule, which fully_shard mixes into a sharded module's class; None before any."""
    return _loaded("torch.distributed.fsdp", "FSDPModule")


def is_fsdp_module(module: nn.Module) -> bool:
    cls = fsdp_module_class()
    return cls is not None and isinstance(module, cls)


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's rows of a sharded tensor; a plain tensor itself."""
    return t.to_local() if is_dtensor(t) else t


def sharded(tensors: list[Any]) -> bool:
    return any(is_dtensor(t) for t in tensors)


def sum_over_ranks(t: torch.Tensor, tensors: list[torch.Tensor]) -> torch.Tensor:
    """`t` (this rank's partial sums) added up over the mesh `tensors` are sharded on; as is when
    none is sharded. FSDP shards every tensor on dim 0 over one mesh: each row lives on one rank."""
    first = next((x for x in tensors if is_dtensor(x)), None)
    if first is None:
        return t
    t = t.clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=first.device_mesh.get_group())
    return t


def squared_norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Each tensor's squared L2 norm over this rank's rows (fp32, one vector)."""
    if not tensors:
        return torch.zeros(0)
    return torch.stack([n.float() ** 2 for n in torch._foreach_norm([local(t) for t in tensors])])


def tensor_norms(tensors: list[torch.Tensor]) -> torch.Tensor:
    """Each tensor's L2 norm over all its rows, wherever they live (at most one collective)."""
    return sum_over_ranks(squared_norms(tensors), tensors).sqrt()
