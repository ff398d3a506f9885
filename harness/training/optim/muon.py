"""Muon for hidden weight matrices, AdamW for everything else, as one optimizer.

Muon orthogonalises the momentum of 2-D weight matrices; it is undefined for
vectors and a poor fit for embeddings and the output head, which keep AdamW.
Wrapping both in a single torch Optimizer lets LR schedulers, checkpointing and
gradient hooks treat it like any other optimizer.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

import torch
from torch import nn
from torch.optim import AdamW, Muon, Optimizer

from harness.training.optim.groups import classify_params, decays, named_groups

# Default AdamW lr is this fraction of the Muon lr: Muon's reference recipe pairs
# lr 0.02 on hidden matrices with an AdamW lr of ~1e-3 for the rest.
ADAMW_LR_RATIO = 1 / 20


def muon_param_groups(
    model: nn.Module, no_decay: Collection[str], head_names: Collection[str]
) -> list[dict[str, Any]]:
    """"muon" (plain 2-D hidden weights), "adamw_decay" and "adamw_no_decay" groups.

    Anything with a kind (bias, norm, embedding, head) or ndim != 2 goes to AdamW;
    the `no_decay` kinds only split the AdamW part.
    """
    infos = classify_params(model, head_names)
    hidden = [i for i in infos if i.param.ndim == 2 and not i.kinds]
    rest = [i for i in infos if not (i.param.ndim == 2 and not i.kinds)]
    return named_groups(
        [
            ("muon", [i.param for i in hidden], {"use_muon": True}),
            ("adamw_decay", [i.param for i in rest if decays(i, no_decay)], {"use_muon": False}),
            (
                "adamw_no_decay",
                [i.param for i in rest if not decays(i, no_decay)],
                {"use_muon": False, "weight_decay": 0.0},
            ),
        ]
    )


class MuonWithAdamW(Optimizer):
    """torch.optim.Muon on groups with use_muon=True, torch.optim.AdamW on the others.

    Every param group must say `use_muon`; `muon_param_groups` builds them. The
    inner optimizers hold the very same group dicts and state dict as this one,
    so a scheduler writing group["lr"] reaches them and `state_dict()` /
    `load_state_dict()` are the stock torch ones.

    adamw_lr defaults to lr * ADAMW_LR_RATIO, or to lr itself when
    adjust_lr_fn="match_rms_adamw" (that scaling exists so both can share one lr).
    """

    def __init__(
        self,
        params: Iterable[dict[str, Any]],
        lr: float = 0.02,
        weight_decay: float = 0.01,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_steps: int = 5,
        ns_coefficients: tuple[float, float, float] = (3.4445, -4.775, 2.0315),
        ns_eps: float = 1e-7,
        adjust_lr_fn: str | None = None,
        adamw_lr: float | None = None,
        adamw_betas: tuple[float, float] = (0.9, 0.95),
        adamw_eps: float = 1e-8,
        adamw_weight_decay: float = 0.1,
    ) -> None:
        if not (isinstance(ns_steps, int) and 1 <= ns_steps < 100):
            raise ValueError(f"ns_steps must be an integer in [1, 99], got {ns_steps!r}")
        if adamw_lr is None:
            adamw_lr = lr if adjust_lr_fn == "match_rms_adamw" else lr * ADAMW_LR_RATIO
        self._muon_options: dict[str, Any] = {
            "momentum": momentum,
            "nesterov": nesterov,
            "ns_steps": ns_steps,
            "ns_coefficients": ns_coefficients,
            "eps": ns_eps,
            "adjust_lr_fn": adjust_lr_fn,
        }
        self._adamw_options: dict[str, Any] = {
            "lr": adamw_lr,
            "betas": adamw_betas,
            "eps": adamw_eps,
            "weight_decay": adamw_weight_decay,
        }
        self._muon: Muon | None = None
        self._adamw: AdamW | None = None
        super().__init__(params, {"lr": lr, "weight_decay": weight_decay})

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add the group here and to the inner optimizer its use_muon flag picks."""
        if "use_muon" not in param_group:
            raise ValueError(
                "MuonWithAdamW needs a use_muon flag on every param group; "
                "harness.training.optim.build_optimizer (or muon_param_groups) provides them"
            )
        use_muon = bool(param_group["use_muon"])
        if not use_muon:
            param_group.setdefault("lr", self._adamw_options["lr"])
            param_group.setdefault("weight_decay", self._adamw_options["weight_decay"])
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        inner = self._muon if use_muon else self._adamw
        if inner is not None:
            inner.add_param_group(group)
        elif use_muon:
            self._muon = Muon([group], lr=group["lr"], weight_decay=group["weight_decay"], **self._muon_options)
            self._muon.state = self.state
        else:
            options = {**self._adamw_options, "lr": group["lr"], "weight_decay": group["weight_decay"]}
            self._adamw = AdamW([group], **options)
            self._adamw.state = self.state

    def __getstate__(self) -> dict[str, Any]:
        """Keep the inner optimizers when pickled; torch's version keeps only groups and state."""
        inner = ("_muon_options", "_adamw_options", "_muon", "_adamw")
        return {**super().__getstate__(), **{key: self.__dict__[key] for key in inner}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Re-point the inner optimizers after load_state_dict swaps groups and state."""
        super().__setstate__(state)
        for inner, use_muon in ((self._muon, True), (self._adamw, False)):
            if inner is not None:
                inner.param_groups = [g for g in self.param_groups if bool(g["use_muon"]) == use_muon]
                inner.state = self.state

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """One update of both inner optimizers."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for inner in (self._muon, self._adamw):
            if inner is not None:
                inner.step()
        return loss
