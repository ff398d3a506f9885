"""Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms").

The update is the sign of an interpolated momentum, so every coordinate moves
by exactly lr: it needs a ~3-10x smaller lr and a correspondingly larger
decoupled weight decay than AdamW, and keeps one state tensor instead of two.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.optim import Optimizer

from harness.training.optim.checks import check_hyperparameters


class Lion(Optimizer):
    """Lion with decoupled weight decay.

    c = b1*m + (1-b1)*g;  w <- w*(1 - lr*wd) - lr*sign(c);  m <- b2*m + (1-b2)*g
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
    ) -> None:
        check_hyperparameters(lr, betas, weight_decay)
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "weight_decay": weight_decay})

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """One Lion update of every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2), wd = group["lr"], group["betas"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Lion does not support sparse gradients")
                state = self.state[p]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                exp_avg = state["exp_avg"]
                update = exp_avg.lerp(p.grad, 1 - beta1).sign_()
                p.mul_(1 - lr * wd).add_(update, alpha=-lr)
                exp_avg.lerp_(p.grad, 1 - beta2)
        return loss
