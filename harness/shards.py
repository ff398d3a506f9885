"""Norms of tensors that may be sharded (FSDP's DTensor parameters and gradients, split by rows
over the ranks): computed on each rank's local rows, then added up over the ranks in one
collective, so a per-tensor norm costs one reduction for all tensors, not one each. Plain
tensors take the same path with no collective at all."""
from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor


def local(t: torch.Tensor) -> torch.Tensor:
    """This rank's rows of a sharded tensor; a plain tensor itself."""
    return t.to_local() if isinstance(t, DTensor) else t


def sharded(tensors: list[torch.Tensor]) -> bool:
    return any(isinstance(t, DTensor) for t in tensors)


def sum_over_ranks(t: torch.Tensor, tensors: list[torch.Tensor]) -> torch.Tensor:
    """`t` (this rank's partial sums) added up over the mesh `tensors` are sharded on; as is when
    none is sharded. FSDP shards every tensor on dim 0 over one mesh: each row lives on one rank."""
    first = next((x for x in tensors if isinstance(x, DTensor)), None)
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
