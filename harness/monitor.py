"""Monitors (config group `monitor`): per-layer statistics, gathered on logging steps only.

level  what                                                              cost on a logging step
off    nothing beyond the global grad norm
basic  per-parameter grad norm, param norm, update/param ratio,          a few foreach norms + one param copy
       per-layer share of units with an all-zero gradient (dead units)
full   basic + activation mean/std/dead fraction (forward hooks),
       attention entropy per head (gpt), optional TensorBoard histograms  hooks for one forward pass

A collection happens on a logging step that crosses a multiple of `every` (so at most once per
`every` steps, and on every logging step when `every <= log_every`); on all other steps no hook
is attached and nothing is computed. Values stay on the device until the trainer reads the
whole log window at once.
"""
from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from omegaconf import DictConfig
from torch import nn

from harness.metric_names import (ACT_DEAD, ACT_MEAN, ACT_STD, ATTN_ENTROPY, GRAD_DEAD, GRAD_NORM, PARAM_NORM,
                                  PARAM_NORM_TOTAL, UPDATE_RATIO)
from harness.typed_config import at_least, one_of, read_typed, setting

LEVELS = ("off", "basic", "full")
ACTIVATIONS = (nn.ReLU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.LeakyReLU)
DEAD_CAPABLE = (nn.ReLU,)  # units that can output exactly 0 for every input
# Layers with one weight row (and bias entry) per output unit: a unit that a ReLU after it zeroes
# for every sample of the batch gets an all-zero gradient row, so the share of such rows counts
# dead units on any model, without forward hooks (embedding rows are tokens, not units). A unit
# counts as dead when its row was zero on each of the last 4 collections: one homogeneous batch
# (data read in target order) silences many units that the next batch uses.
UNIT_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
DEAD_COLLECTIONS = 4


@dataclass(frozen=True)
class MonitorConfig:
    level: str = setting("basic", f"one of {list(LEVELS)}", one_of(LEVELS))
    every: int = setting(1, "an integer >= 1 (steps between collections)", at_least(1))
    histograms: bool = setting(False, "true or false")


def monitor_config(cfg: DictConfig) -> MonitorConfig:
    return read_typed(cfg, MonitorConfig, "monitor")


log = logging.getLogger("harness")


class Monitor:
    def __init__(self, cfg: DictConfig, model: nn.Module, max_steps: int | None = None) -> None:
        self.level = cfg.level
        self.every = int(cfg.get("every", 1))
        if max_steps is not None and self.level != "off" and self.every > max_steps // 4:
            # a run shorter than the cadence would log no statistics at all: collect ~4 times
            adapted = max(1, max_steps // 4)
            log.info("monitor.every=%d is long for a %d-step run: collecting every %d steps", self.every,
                     max_steps, adapted)
            self.every = adapted
        self.histograms = bool(cfg.get("histograms", False)) and self.level == "full"
        self.named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.units = [(n, m.weight, m.bias) for n, m in model.named_modules()
                      if isinstance(m, UNIT_LAYERS) and m.weight.requires_grad]
        self.silent: dict[str, deque[torch.Tensor]] = {n: deque(maxlen=DEAD_COLLECTIONS) for n, _, _ in self.units}
        self.model = model
        self.metrics: dict[str, torch.Tensor] = {}
        self.hist_tensors: dict[str, torch.Tensor] = {}
        self._before: list[torch.Tensor] | None = None

    def due(self, step: int, log_every: int) -> bool:
        """Collect on logging step `step`? True when a multiple of `every` lies in
        (previous logging step, step]; stateless, so a resumed run collects on the same steps."""
        if self.level == "off":
            return False
        previous_log = ((step - 1) // log_every) * log_every
        return step // self.every != previous_log // self.every

    @contextlib.contextmanager
    def capture_forward(self, enabled: bool) -> Iterator[None]:
        """Forward hooks for one pass (full level, logging steps only)."""
        if not enabled or self.level != "full":
            yield
            return
        handles = [m.register_forward_hook(self._activation_hook(name, isinstance(m, DEAD_CAPABLE)))
                   for name, m in self.model.named_modules() if isinstance(m, ACTIVATIONS)]
        attention = [m for m in self.model.modules() if hasattr(m, "record_entropy")]
        for m in attention:
            m.record_entropy = True
        try:
            yield
        finally:
            for h in handles:
                h.remove()
            for i, m in enumerate(attention):
                m.record_entropy = False
                if m.last_entropy is not None:
                    for head, value in enumerate(m.last_entropy):
                        self.metrics[f"{ATTN_ENTROPY}layer{i}/head{head}"] = value
                    m.last_entropy = None

    def _activation_hook(self, name: str, dead_capable: bool):
        def hook(_module: nn.Module, _inputs: tuple, output: torch.Tensor) -> None:
            out = output.detach().float()
            self.metrics[ACT_STD + name], self.metrics[ACT_MEAN + name] = torch.std_mean(out)
            if dead_capable:  # a unit is dead when it is 0 for every sample of the batch
                self.metrics[ACT_DEAD + name] = (out.reshape(-1, out.shape[-1]).amax(0) <= 0).float().mean()
        return hook

    @torch.no_grad()
    def after_backward(self) -> None:
        """Per-parameter grad norms before clipping (what the model produced); snapshot params for the update ratio."""
        with_grad = [(n, p) for n, p in self.named if p.grad is not None]
        norms = torch._foreach_norm([p.grad for _, p in with_grad])
        for (name, _), norm in zip(with_grad, norms):
            self.metrics[GRAD_NORM + name] = norm
        for name, weight, bias in self.units:
            if weight.grad is not None:
                silent = weight.grad.flatten(1).abs().amax(1) == 0
                if bias is not None and bias.grad is not None:
                    silent &= bias.grad == 0  # a zero input zeroes the weight row, not the bias: not dead
                self.silent[name].append(silent)
                dead = torch.stack(list(self.silent[name])).all(0)
                self.metrics[GRAD_DEAD + name] = dead.float().mean()
        if self.histograms:
            self.hist_tensors.update({f"grad/{n}": p.grad.detach().clone() for n, p in with_grad})
        self._before = torch._foreach_mul([p.detach() for _, p in self.named], 1.0)  # one batched copy

    @torch.no_grad()
    def after_step(self) -> None:
        params = [p.detach() for _, p in self.named]
        param_norms = torch._foreach_norm(params)
        if self._before is not None:
            torch._foreach_sub_(self._before, params)  # in place: the snapshot becomes -update
            for (name, _), delta, norm in zip(self.named, torch._foreach_norm(self._before), param_norms):
                self.metrics[UPDATE_RATIO + name] = delta / norm.clamp_min(1e-12)
            self._before = None
        for (name, _), norm in zip(self.named, param_norms):
            self.metrics[PARAM_NORM + name] = norm
        self.metrics[PARAM_NORM_TOTAL] = torch.linalg.vector_norm(torch.stack(param_norms))
        if self.histograms:
            self.hist_tensors.update({f"param/{n}": p.detach().clone() for n, p in self.named})

    def state_dict(self) -> dict[str, list[torch.Tensor]]:
        """The recent zero-gradient masks, so a resumed run counts dead units as if never stopped."""
        return {name: [m.cpu() for m in masks] for name, masks in self.silent.items()}

    def load_state_dict(self, state: dict[str, list[torch.Tensor]]) -> None:
        for name, weight, _ in self.units:
            self.silent[name].extend(m.to(weight.device) for m in state.get(name, []))

    def pop(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """This log step's scalars (device tensors) and histogram tensors; clears both."""
        metrics, hists = self.metrics, self.hist_tensors
        self.metrics, self.hist_tensors = {}, {}
        return metrics, hists
