"""FLOPs and MFU (model FLOPs utilisation): the share of the device's peak matmul throughput that
a training step turns into the model's own FLOPs. Step time alone does not say whether a run is
slow; MFU compares it with what the hardware could do (dense transformers reach 30-50% on GPUs).

Model FLOPs follow PaLM's definition: the forward and backward matmuls the model needs, not what
the implementation spends on top (activation checkpointing's recomputed forward, kernels that
redo work) and not the elementwise ops (norms, activations, the optimizer), which cost bandwidth
rather than matmul throughput. A peak is the vendor's dense figure; no peak, no MFU.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import torch
from omegaconf import DictConfig
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from harness.models.gpt import GPT
from harness.core.typed_config import read_typed, setting, within


class Peak(NamedTuple):
    """A GPU's dense (no 2:4 sparsity) peak TFLOPS per matmul precision. bf16 and fp16 are tensor
    core figures with fp32 accumulation, which is what autocast's matmuls use."""

    bf16: float | None  # None: no bfloat16 tensor cores
    fp16: float
    tf32: float | None  # fp32 matmuls on tensor cores when TF32 is allowed; None: no TF32 (pre-Ampere)
    fp32: float  # plain FP32 (CUDA cores): fp32 matmuls when TF32 is off


# First match wins, so a specific name comes before a generic one it also matches ("H100 PCIe"
# before "H100"). A name matches where it stands as whole words of torch.cuda.get_device_name()
# (case-insensitive), so "A10" does not take an "A100" nor "L4" an "L40S". Datasheets quote
# tensor-core figures with sparsity; the dense figure is half of it.
PEAK_TFLOPS: tuple[tuple[str, Peak], ...] = (
    # NVIDIA B200 (HGX B200 datasheet, 8 GPUs: BF16 36 PF, TF32 18 PF sparse; FP32 600 TF) per GPU
    ("B200", Peak(bf16=2250.0, fp16=2250.0, tf32=1125.0, fp32=75.0)),
    # NVIDIA H200 NVL (H200 datasheet: BF16/FP16 1,671, TF32 835 sparse; FP32 60)
    ("H200 NVL", Peak(bf16=835.5, fp16=835.5, tf32=417.5, fp32=60.0)),
    # NVIDIA H200 SXM (H200 datasheet: BF16/FP16 1,979, TF32 989 sparse; FP32 67)
    ("H200", Peak(bf16=989.5, fp16=989.5, tf32=494.5, fp32=67.0)),
    # NVIDIA GH200's Hopper GPU (GH200 datasheet: BF16/FP16 1,979, TF32 989 sparse; FP32 67)
    ("GH200", Peak(bf16=989.5, fp16=989.5, tf32=494.5, fp32=67.0)),
    # NVIDIA H100 NVL (H100 datasheet: BF16/FP16 1,671, TF32 835 sparse; FP32 60)
    ("H100 NVL", Peak(bf16=835.5, fp16=835.5, tf32=417.5, fp32=60.0)),
    # NVIDIA H100 PCIe (H100 datasheet: BF16/FP16 1,513, TF32 756 sparse; FP32 51)
    ("H100 PCIe", Peak(bf16=756.5, fp16=756.5, tf32=378.0, fp32=51.0)),
    # NVIDIA H100 SXM5, named "NVIDIA H100 80GB HBM3" (H100 datasheet: BF16/FP16 1,979, TF32 989 sparse; FP32 67)
    ("H100", Peak(bf16=989.5, fp16=989.5, tf32=494.5, fp32=67.0)),
    # NVIDIA A100, SXM4 and PCIe alike (A100 datasheet: BF16/FP16 312, TF32 156 dense; FP32 19.5)
    ("A100", Peak(bf16=312.0, fp16=312.0, tf32=156.0, fp32=19.5)),
    # NVIDIA L40S (L40S datasheet: BF16/FP16 362.05, TF32 183 dense; FP32 91.6)
    ("L40S", Peak(bf16=362.05, fp16=362.05, tf32=183.0, fp32=91.6)),
    # NVIDIA L40 (L40 datasheet: BF16/FP16 181, TF32 90.5 dense; FP32 90.5)
    ("L40", Peak(bf16=181.0, fp16=181.0, tf32=90.5, fp32=90.5)),
    # NVIDIA L4 (L4 datasheet: BF16/FP16 242, TF32 120 sparse; FP32 30.3)
    ("L4", Peak(bf16=121.0, fp16=121.0, tf32=60.0, fp32=30.3)),
    # NVIDIA A10G (AWS G5): NVIDIA publishes no A10G datasheet; these are the A10 datasheet's
    # figures (BF16/FP16 125, TF32 62.5 dense; FP32 31.2), so A10G MFU is approximate
    ("A10G", Peak(bf16=125.0, fp16=125.0, tf32=62.5, fp32=31.2)),
    # NVIDIA A10 (A10 datasheet: BF16/FP16 125, TF32 62.5 dense; FP32 31.2)
    ("A10", Peak(bf16=125.0, fp16=125.0, tf32=62.5, fp32=31.2)),
    # GeForce RTX 4090 (Ada whitepaper: FP16/BF16 tensor with FP32 accumulate 165.2, TF32 82.6 dense;
    # FP32 82.6). Its FP16-accumulate rate (330.3) is twice that, but autocast accumulates in FP32.
    ("RTX 4090", Peak(bf16=165.2, fp16=165.2, tf32=82.6, fp32=82.6)),
    # Tesla V100S PCIe (V100 datasheet: tensor 130; FP32 16.4); no bfloat16, no TF32
    ("V100S", Peak(bf16=None, fp16=130.0, tf32=None, fp32=16.4)),
    # Tesla V100 PCIe (V100 datasheet: tensor 112; FP32 14)
    ("V100-PCIE", Peak(bf16=None, fp16=112.0, tf32=None, fp32=14.0)),
    # Tesla V100 SXM2 (V100 datasheet: tensor 125; FP32 15.7)
    ("V100", Peak(bf16=None, fp16=125.0, tf32=None, fp32=15.7)),
)


@dataclass(frozen=True)
class PerfConfig:
    peak_tflops: float | None = setting(None, "null (looked up by GPU name; none on CPU) or a finite number > 0: the "
                                              "device's dense peak TFLOPS at the run's precision",
                                        within(0.0, math.inf, low_open=True, high_open=True))


def perf_config(cfg: DictConfig) -> PerfConfig:
    return read_typed(cfg, PerfConfig, "perf")


def _is_named(key: str, device_name: str) -> bool:
    return re.search(rf"(?<![a-z0-9]){re.escape(key.lower())}(?![a-z0-9])", device_name.lower()) is not None


def peak_for_name(device_name: str, precision: str, tf32: bool) -> float | None:
    """Peak FLOP/s of the GPU called `device_name` at `precision` (fp32 | bf16 | fp16); None when
    the GPU is not in the table or lacks that precision. fp32 matmuls run on TF32 tensor cores
    only when TF32 is allowed (torch's default is not to), so fp32 takes the TF32 peak then and the
    plain FP32 peak otherwise: MFU is measured against what the run's matmuls can reach."""
    for key, peak in PEAK_TFLOPS:
        if _is_named(key, device_name):
            fp32 = peak.tf32 if tf32 and peak.tf32 is not None else peak.fp32
            tflops = {"bf16": peak.bf16, "fp16": peak.fp16, "fp32": fp32}[precision]
            return None if tflops is None else tflops * 1e12
    return None


def peak_flops(device: torch.device, precision: str, override_tflops: float | None) -> float | None:
    """Peak FLOP/s of one device: `perf.peak_tflops` when set, else the table's entry for this
    GPU; None on CPU, MPS or an unknown GPU, where MFU is not logged."""
    if override_tflops is not None:
        return float(override_tflops) * 1e12
    if device.type != "cuda":
        return None
    return peak_for_name(torch.cuda.get_device_name(device), precision, torch.backends.cuda.matmul.allow_tf32)


def gpt_flops_per_token(model: GPT) -> float:
    """Training FLOPs per token of the built-in GPT, forward + backward: 6·N + 12·n_layer·n_embd·T
    (nanoGPT's and PaLM's estimate; T = block_size, every sample is a full window).

    N counts the weights of the matmuls every token goes through: the four per block (attention
    in and out, MLP up and down: 12·n_embd² a layer) and the lm_head (n_embd·vocab). A matmul with
    an m×n weight costs 2mn per token forward and 4mn backward (input and weight gradients), so
    6·N. Embedding lookups are not matmuls: the position embedding never counts, the token
    embedding counts only through the lm_head it shares with tie_embeddings=true, so tied or not
    the count is the same (counting all parameters would count an untied vocab matrix twice).
    Biases, norms and activations are elementwise and left out. The attention term is QKᵀ and
    attention·V over the full T×T square (forward 4·n_embd·T a layer, backward twice that),
    causal masking notwithstanding, as nanoGPT counts it.
    """
    matmul_weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    cfg = model.cfg
    return 6.0 * matmul_weights + 12.0 * cfg.n_layer * cfg.n_embd * cfg.block_size


def flops_per_update(model: nn.Module, batch_size: int) -> float | None:
    """Model FLOPs of one optimizer update (batch_size samples over all micro-batches and ranks,
    batch_size × block_size tokens) in closed form for the built-in GPT; None for other models,
    whose FLOPs `measure_flops` counts. Pass the unwrapped model (not DDP's or compile's wrapper)."""
    if not isinstance(model, GPT):
        return None
    return gpt_flops_per_token(model) * batch_size * model.cfg.block_size


def measure_flops(fn: Callable[[], object]) -> int:
    """FLOPs that torch's FlopCounterMode counts while `fn()` runs (e.g. one training step), for
    models without a closed form. It counts matmuls and convolutions by their shapes. Attention
    through scaled_dot_product_attention counts on CUDA (flash, memory-efficient and cuDNN
    kernels, backward including its recomputation of the scores) but not on CPU, whose fused
    kernel has no FLOP formula in torch."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def mfu(flops_per_update: float, seconds_per_update: float, peak: float) -> float:
    """Model FLOPs utilisation, a fraction of `peak` (FLOP/s): the update's model FLOPs over what
    the device could do in the update's time. Under DDP, pass one rank's share of the FLOPs (or the
    peak times the world size)."""
    return flops_per_update / (seconds_per_update * peak)
