"""LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning").

Adam's step is rescaled per parameter tensor by the trust ratio ||w|| / ||update||,
so every layer moves by a similar fraction of its own norm. That keeps very
large batches (and the large learning rates they need) stable.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.optim import Optimizer

from harness.training.optim.checks import check_hyperparameters


class Lamb(Optimizer):
    """LAMB with bias-corrected Adam moments and decoupled weight decay in the update.

    u = m_hat / (sqrt(v_hat) + eps) + wd*w;  w <- w - lr * r * u,
    r = ||w|| / ||u||, or 1 when either norm is 0 (fresh zero biases, zero grads).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict[str, Any]],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ) -> None:
        check_hyperparameters(lr, betas, weight_decay)
        if not eps >= 0:
            raise ValueError(f"eps must be >= 0, got {eps}")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:  # type: ignore[override]
        """One LAMB update of every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            eps, wd = group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients")
                state = self.state[p]
                if "step" not in state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                step, exp_avg, exp_avg_sq = state["step"], state["exp_avg"], state["exp_avg_sq"]
                exp_avg.lerp_(p.grad, 1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                m_hat = exp_avg / (1 - beta1**step)
                v_hat = exp_avg_sq / (1 - beta2**step)
                update = m_hat / (v_hat.sqrt() + eps)
                if wd:
                    update.add_(p, alpha=wd)
                p.sub_(update * (lr * trust_ratio(p, update)))
        return loss


def trust_ratio(weight: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """||weight|| / ||update|| as a 0-dim tensor (no host sync), 1 where either norm is 0."""
    w_norm, u_norm = weight.norm(), update.norm()
    return torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
