"""Run under torchrun (2 ranks, gloo): the harness's gradient math on FSDP-sharded parameters
against the same math on an unsharded copy, on the same full batch. Rank 0 prints one JSON line:
for each clip mode the largest gradient difference after clipping, and for the monitor the
largest difference of its per-layer statistics."""
from __future__ import annotations

import json
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor

from harness.training.clipping import MODES, clip_gradients, global_grad_norm
from harness.core.distributed import dist_info_from_env
from harness.training.monitor import Monitor, MonitorConfig
from harness.training.parallel import parallel_config, parallelize

CLIPS = {"norm": 0.5, "value": 0.01, "layer": 0.05, "adaptive": 0.02}


class Net(nn.Module):
    """Tensors of awkward sizes: rows that do not split evenly over 2 ranks (7), a 1-d tensor of 3."""

    fsdp_units = ("Block",)

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(6, 7)
        self.block = Block()
        self.head = nn.Linear(7, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(torch.relu(self.stem(x))))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(7, 7)
        self.norm = nn.LayerNorm(7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.relu(self.linear(self.norm(x)))


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def backward(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    nn.functional.cross_entropy(model(x), y).backward()


def main() -> None:
    info = dist_info_from_env()
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    x, y = torch.randn(16, 6) * 3, torch.randint(0, 3, (16,))
    mine = slice(info.rank * 8, (info.rank + 1) * 8)  # each rank its half: FSDP averages the halves' gradients
    result = {}
    for mode in MODES:
        torch.manual_seed(1)
        plain = Net()
        sharded = Net()
        sharded.load_state_dict(plain.state_dict())
        parallelize(sharded, parallel_config({"name": "fsdp"}), "fp32", torch.device("cpu"), info)
        backward(plain, x, y)
        backward(sharded, x[mine], y[mine])
        plain_params, sharded_params = list(plain.parameters()), list(sharded.parameters())
        clip_gradients(plain_params, mode, CLIPS[mode], global_grad_norm(plain_params))
        norm = global_grad_norm(sharded_params)
        clip_gradients(sharded_params, mode, CLIPS[mode], norm)
        result[mode] = max((full(s.grad) - p.grad).abs().max().item() for s, p in zip(sharded_params, plain_params))
        result[f"{mode}_clipped_something"] = any(
            not torch.allclose(full(s.grad), g) for s, g in zip(sharded_params, _unclipped(x, y)))
    torch.manual_seed(1)
    plain, sharded = Net(), Net()
    sharded.load_state_dict(plain.state_dict())
    parallelize(sharded, parallel_config({"name": "fsdp"}), "fp32", torch.device("cpu"), info)
    settings = MonitorConfig(level="basic", every=1)
    monitors = {"plain": Monitor(settings, plain), "sharded": Monitor(settings, sharded, dist=info)}
    stats = {}
    for name, model, (xs, ys) in (("plain", plain, (x, y)), ("sharded", sharded, (x[mine], y[mine]))):
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        backward(model, xs, ys)
        monitors[name].after_backward()
        optimizer.step()
        monitors[name].after_step()
        stats[name] = {k: float(v) for k, v in monitors[name].pop()[0].items()}
    result["monitor_keys_equal"] = stats["plain"].keys() == stats["sharded"].keys()
    result["monitor"] = max(abs(stats["plain"][k] - stats["sharded"][k]) for k in stats["plain"])
    result["monitor_metrics"] = len(stats["plain"])
    result["fp16_scales"] = fp16_scales(info, x[mine], y[mine])
    if info.rank == 0:
        print(json.dumps(result), flush=True)
    dist.barrier()
    os._exit(0)  # gloo's teardown after FSDP can abort the process ("terminate called"); train.py exits alike


def fp16_scales(info, x: torch.Tensor, y: torch.Tensor) -> list[list[float]]:
    """precision=fp16 on shards: bf16-style parameters in fp16, GradScaler on DTensor gradients. An
    overflow on rank 1 only (step 2) must back the scale off on both ranks alike. Every rank's
    scales, step by step."""
    torch.manual_seed(1)
    model = Net()
    parallelize(model, parallel_config({"name": "fsdp"}), "fp16", torch.device("cpu"), info)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    scaler = torch.amp.GradScaler("cpu")
    scales = []
    for step in range(4):
        with torch.autocast("cpu", dtype=torch.float16):
            loss = nn.functional.cross_entropy(model(x).float(), y)
        if step == 2 and info.rank == 1:
            loss = loss * float("inf")
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        scales.append(scaler.get_scale())
    gathered: list = [None] * info.world_size
    dist.all_gather_object(gathered, scales)
    return gathered


def _unclipped(x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    torch.manual_seed(1)
    model = Net()
    backward(model, x, y)
    return [p.grad for p in model.parameters()]


if __name__ == "__main__":
    main()
