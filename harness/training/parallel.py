"""The `parallel` config group: how the model is spread over the processes torchrun starts.

none  one process; refused under torchrun (every rank would train a copy of its own)
ddp   every rank holds the whole model, its gradients and optimizer state; gradients are
      all-reduced in backward (DistributedDataParallel). In one process: nothing to do.
fsdp  parameters, gradients and optimizer state are sharded over the ranks (FSDP2
      `fully_shard`): each holds ~1/world_size of them and gathers a unit's parameters only
      while that unit runs. For models whose training state does not fit one device.

Sharded units are modules of the classes named in `parallel.wrap`, or the model's own
`fsdp_units` (the built-in models declare theirs: the GPT's blocks, the MLP's hidden layers, the
RNN's recurrent stack, the ResNet's blocks), plus the root, which holds the rest.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import torch
import torch.distributed as dist
from omegaconf import DictConfig
from torch import nn

from harness.core.distributed import DistInfo
from harness.core.errors import ConfigError
from harness.core.shards import fsdp_module_class, is_fsdp_module
from harness.core.typed_config import one_of, read_typed, setting
from harness.training.optim import OptimSpec

log = logging.getLogger("harness")
MODES = ("none", "ddp", "fsdp")
PARAM_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass(frozen=True)
class ParallelConfig:
    name: str = setting("ddp", f"one of {list(MODES)}", one_of(MODES))
    reshard_after_forward: bool = setting(True, "true or false")
    wrap: list | None = setting(None, "null (the model's own units) or a list of module class names",
                                lambda v: all(isinstance(name, str) and name for name in v))
    cpu_offload: bool = setting(False, "true or false")


def parallel_config(cfg: DictConfig | None) -> ParallelConfig:
    return read_typed(cfg, ParallelConfig, "parallel")


def validate_parallel_config(cfg: DictConfig | None, world_size: int, device: torch.device,
                             optim_target: str | None = None) -> ParallelConfig:
    settings = parallel_config(cfg)
    if settings.name == "none" and world_size > 1:
        raise ConfigError("parallel", "none", f"ddp or fsdp under torchrun ({world_size} processes would each "
                                              "train a model of their own)")
    if is_sharded(settings) and optim_target in NOT_ON_SHARDS:
        raise ConfigError("optim._target_", optim_target, "an optimizer that steps sharded parameters with "
                                                         "parallel=fsdp: adamw, adam, sgd, lion, lamb or muon")
    if settings.cpu_offload and is_sharded(settings) and device.type != "cuda":
        raise ConfigError("parallel.cpu_offload", True, "false on a CPU run (the parameters are on the CPU already)")
    return settings


def is_sharded(settings: ParallelConfig) -> bool:
    return settings.name == "fsdp"


# Optimizers that cannot step DTensor parameters: Adafactor's in-place row/column statistics need
# placement changes DTensor refuses; bitsandbytes' 8-bit kernels take plain CUDA tensors only.
NOT_ON_SHARDS = ("torch.optim.Adafactor", "bitsandbytes.optim.AdamW8bit")
FUSED_ON_SHARDS = ("torch.optim.Adam", "torch.optim.AdamW")  # fused kernels DTensor has a sharding strategy for


def optimizer_config(optim: OptimSpec, settings: ParallelConfig) -> OptimSpec:
    """The optimizer as configured, except that fused=true falls back to the foreach kernels on
    sharded parameters when DTensor cannot run that fused kernel (SGD's): the guard then reads
    its verdict on the host instead of skipping on the device."""
    if not is_sharded(settings) or not optim.options.get("fused") or optim.path in FUSED_ON_SHARDS:
        return optim
    log.info("parallel=fsdp: %s has no fused kernel for sharded parameters; optim.fused=false", optim.path)
    return replace(optim, options={**optim.options, "fused": False})


def class_name(module: nn.Module) -> str:
    """The module's own class name: fully_shard swaps a sharded module's class for a subclass
    named FSDP<Name>, which the diagnosis, the logs and parallel.wrap must not see."""
    if is_fsdp_module(module):
        return next(base for base in type(module).__bases__ if base is not fsdp_module_class()).__name__
    return type(module).__name__


def shard_units(model: nn.Module, wrap: list[str] | None) -> list[nn.Module]:
    """The modules sharded as units, innermost first (fully_shard must see children before parents)."""
    names = set(wrap if wrap is not None else getattr(model, "fsdp_units", ()))
    units = [m for m in model.modules() if m is not model and type(m).__name__ in names]
    return list(reversed(units))


def check_wrap(model: nn.Module, settings: ParallelConfig) -> None:
    """parallel.wrap must name classes the model has: a typo would shard nothing but the root."""
    present = {type(m).__name__ for m in model.modules()}
    missing = [name for name in settings.wrap or () if name not in present]
    if missing:
        raise ConfigError("parallel.wrap", missing[0], f"class names of the model's modules, e.g. "
                                                       f"{sorted(present - {type(model).__name__})[:6]}")


def parallelize(raw_model: nn.Module, settings: ParallelConfig, precision: str, device: torch.device,
                dist_info: DistInfo) -> nn.Module:
    """The model the step runs: DDP around it, or the same module sharded in place (fsdp)."""
    if is_sharded(settings):
        return _fully_shard(raw_model, settings, precision)
    if dist_info.enabled:
        return nn.parallel.DistributedDataParallel(raw_model, device_ids=[device.index] if device.type == "cuda"
                                                   else None)
    return raw_model


def _fully_shard(model: nn.Module, settings: ParallelConfig, precision: str) -> nn.Module:
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    check_wrap(model, settings)
    # bf16/fp16 parameters in forward and backward, gradients reduced and kept in fp32
    mp = MixedPrecisionPolicy(param_dtype=PARAM_DTYPES.get(precision), reduce_dtype=torch.float32 if precision in
                              PARAM_DTYPES else None)
    options = {"reshard_after_forward": settings.reshard_after_forward, "mp_policy": mp,
               "offload_policy": CPUOffloadPolicy() if settings.cpu_offload else OffloadPolicy()}
    units = shard_units(model, settings.wrap)
    names = ", ".join(sorted({type(u).__name__ for u in units}))  # before fully_shard renames them FSDP<Name>
    for unit in units:
        fully_shard(unit, **options)
    fully_shard(model, **options)
    if not units:
        log.info("parallel=fsdp: %s names no units (parallel.wrap or an fsdp_units attribute); the whole model "
                 "is one unit, gathered at once in forward", type(model).__name__)
    else:
        log.info("parallel=fsdp: %d units (%s) and the root, sharded over %d ranks", len(units), names,
                 dist.get_world_size())
    return model
