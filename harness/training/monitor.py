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
from typing import Any

import torch
from omegaconf import DictConfig
from torch import nn

from harness.core.distributed import DistInfo, all_gather_objects
from harness.core.metric_names import (ACT_DEAD, ACT_MEAN, ACT_STD, ATTN_ENTROPY, GRAD_DEAD, GRAD_NORM, PARAM_NORM,
                                  PARAM_NORM_TOTAL, UPDATE_RATIO)
from harness.core.shards import local, sharded, squared_norms, sum_over_ranks
from harness.core.typed_config import at_least, one_of, read_typed, setting

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
# The forward hooks' dead fraction counts the same way: a ReLU unit is dead when it output 0 for
# every sample of each of the last 4 collections' batches. One batch is too few samples: at batch 1
# a healthy layer has about half its units at 0 for that one sample.
ACT_PREFIX = "act:"  # saved activation masks, beside the weight-row masks
RANKS = "ranks"  # a sharded run's saved masks: one entry per rank


@dataclass(frozen=True)
class MonitorConfig:
    level: str = setting("basic", f"one of {list(LEVELS)}", one_of(LEVELS))
    every: int = setting(25, "an integer >= 1 (steps between collections)", at_least(1))
    histograms: bool = setting(False, "true or false")


def monitor_config(cfg: DictConfig) -> MonitorConfig:
    return read_typed(cfg, MonitorConfig, "monitor")


log = logging.getLogger("harness")


class Monitor:
    def __init__(self, settings: MonitorConfig, model: nn.Module, max_steps: int | None = None,
                 dist: DistInfo = DistInfo()) -> None:
        self.level = settings.level
        self.every = settings.every
        if max_steps is not None and self.level != "off" and self.every > max_steps // 4:
            # a run shorter than the cadence would log no statistics at all: collect ~4 times
            adapted = max(1, max_steps // 4)
            log.info("monitor.every=%d is long for a %d-step run: collecting every %d steps", self.every,
                     max_steps, adapted)
            self.every = adapted
        self.histograms = settings.histograms and self.level == "full"
        self.named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        self.units = [(n, m.weight, m.bias) for n, m in model.named_modules()
                      if isinstance(m, UNIT_LAYERS) and m.weight.requires_grad]
        self.silent: dict[str, deque[torch.Tensor]] = {n: deque(maxlen=DEAD_COLLECTIONS) for n, _, _ in self.units}
        self.inactive: dict[str, deque[torch.Tensor]] = {}  # ReLU module name -> its recent all-zero masks
        self._calls: dict[str, int] = {}  # this forward's calls of each hooked module so far
        self.model, self.dist = model, dist
        self.sharded = sharded([p for _, p in self.named])
        self.device = next((local(p).device for _, p in self.named), torch.device("cpu"))
        self._sums: dict[str, tuple[list[str], torch.Tensor]] = {}  # kind -> names, this rank's sums
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
        self._calls: dict[str, int] = {}
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
            if dead_capable:  # one ReLU module applied at several places counts each place apart
                call = self._calls[name] = self._calls.get(name, -1) + 1
                place = name if call == 0 else f"{name}#{call}"
                masks = self.inactive.setdefault(place, deque(maxlen=DEAD_COLLECTIONS))
                mask = _units_at_zero(out)
                if masks and masks[-1].shape != mask.shape:  # another width at this place: start over
                    masks.clear()
                masks.append(mask)
                self.metrics[ACT_DEAD + place] = torch.stack(list(masks)).all(0).float().mean()
        return hook

    @torch.no_grad()
    def after_backward(self) -> None:
        """Per-parameter grad norms before clipping (what the model produced) and dead units;
        snapshot params for the update ratio. Kept as this rank's sums until pop() adds them up."""
        with_grad = [(n, p) for n, p in self.named if p.grad is not None]
        self._sums[GRAD_NORM] = ([n for n, _ in with_grad], squared_norms([p.grad for _, p in with_grad]))
        dead_names, counts = [], []
        for name, weight, bias in self.units:
            if weight.grad is not None:
                silent = local(weight.grad).flatten(1).abs().amax(1) == 0  # this rank's rows (units)
                if bias is not None and bias.grad is not None:
                    silent &= local(bias.grad) == 0  # a zero input zeroes the weight row, not the bias: not dead
                self.silent[name].append(silent)
                dead = torch.stack(list(self.silent[name])).all(0)
                dead_names.append(name)
                counts += [dead.sum().float(), torch.tensor(float(dead.numel()), device=dead.device)]
        if counts:
            self._sums[GRAD_DEAD] = (dead_names, torch.stack(counts))
        if self.histograms:  # a sharded tensor shows this rank's rows
            self.hist_tensors.update({f"grad/{n}": local(p.grad).detach().clone() for n, p in with_grad})
        self._before = torch._foreach_mul([local(p.detach()) for _, p in self.named], 1.0)  # one batched copy

    @torch.no_grad()
    def after_step(self) -> None:
        params = [local(p.detach()) for _, p in self.named]
        names = [n for n, _ in self.named]
        self._sums[PARAM_NORM] = (names, squared_norms(params))
        if self._before is not None:
            torch._foreach_sub_(self._before, params)  # in place: the snapshot becomes -update
            self._sums[UPDATE_RATIO] = (names, squared_norms(self._before))
            self._before = None
        if self.histograms:
            self.hist_tensors.update({f"param/{n}": p.clone() for n, p in zip(names, params)})

    def _add_up(self) -> None:
        """This collection's sums over every rank (one collective when the model is sharded), then
        the metrics they give: norms, update/param ratios, dead-unit shares."""
        if not self._sums:
            return
        parts = list(self._sums.items())
        total = sum_over_ranks(torch.cat([values.to(self.device) for _, (_, values) in parts]),
                               [p for _, p in self.named])
        sums, start = {}, 0
        for kind, (names, values) in parts:
            sums[kind] = (names, total[start:start + len(values)])
            start += len(values)
        self._sums = {}
        if GRAD_NORM in sums:
            self.metrics.update({GRAD_NORM + n: v.sqrt() for n, v in zip(*sums[GRAD_NORM])})
        if GRAD_DEAD in sums:
            names, counts = sums[GRAD_DEAD]
            self.metrics.update({GRAD_DEAD + n: dead / rows for n, dead, rows in zip(names, counts[0::2],
                                                                                      counts[1::2])})
        if PARAM_NORM in sums:
            names, squares = sums[PARAM_NORM]
            norms = squares.sqrt()
            self.metrics.update({PARAM_NORM + n: v for n, v in zip(names, norms)})
            self.metrics[PARAM_NORM_TOTAL] = squares.sum().sqrt()
            if UPDATE_RATIO in sums:
                ratios = sums[UPDATE_RATIO][1].sqrt() / norms.clamp_min(1e-12)
                self.metrics.update({UPDATE_RATIO + n: v for n, v in zip(names, ratios)})

    def state_dict(self) -> dict[str, Any]:
        """The recent zero-gradient masks, so a resumed run counts dead units as if never stopped;
        sharded, each rank's own rows (a collective)."""
        mine = {name: [m.cpu() for m in masks] for name, masks in self.silent.items()}
        mine.update({ACT_PREFIX + name: [m.cpu() for m in masks] for name, masks in self.inactive.items()})
        if not self.sharded:
            return mine
        return {RANKS: all_gather_objects(mine, self.dist)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if RANKS in state:  # a sharded run's: each rank's rows are its own, on the same world size only
            ranks = state[RANKS]
            state = ranks[self.dist.rank] if self.sharded and len(ranks) == self.dist.world_size else {}
        elif self.sharded:
            state = {}  # whole masks do not split into this rank's rows: the dead-unit count starts over
        for name, weight, _ in self.units:
            self.silent[name].extend(m.to(weight.device) for m in state.get(name, []))
        for key, masks in state.items():
            if key.startswith(ACT_PREFIX):
                self.inactive[key[len(ACT_PREFIX):]] = deque((m.to(self.device) for m in masks),
                                                             maxlen=DEAD_COLLECTIONS)

    def pop(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """This log step's scalars (device tensors) and histogram tensors; clears both. Every rank
        calls it on the same steps (the sums of a sharded model are added up here)."""
        self._add_up()
        metrics, hists = self.metrics, self.hist_tensors
        self.metrics, self.hist_tensors = {}, {}
        return metrics, hists


def _units_at_zero(out: torch.Tensor) -> torch.Tensor:
    """Per unit of a ReLU's output: whether it was <= 0 for every sample and position. Units are
    channels: dim 1 of a feature map (N, C, H, W[, D]), the last dim otherwise (N, F) or (N, T, F)."""
    channels = out.movedim(1, -1) if out.dim() >= 4 else out
    return channels.reshape(-1, channels.shape[-1]).amax(0) <= 0
