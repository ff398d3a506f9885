"""Which part of a multi-part objective an update follows: each part's share of the loss's
gradient, measured on the monitor's steps so that a part drowning the others shows.

The weights the objective sums its parts with are its own, so they are recovered, not read: the
loss's gradient g is fitted as a combination sum_k w_k g_k of the parts' gradients (least squares
over their Gram matrix, k x k), and part k's share is |w_k| ||g_k|| / sum_j |w_j| ||g_j||. One
extra backward per part, on those steps only; the parts' gradients are held together while the
Gram matrix is summed (k copies of the gradients)."""
from __future__ import annotations

import torch
from torch import nn


def gradient_shares(parts: dict[str, torch.Tensor], loss: torch.Tensor,
                    params: list[nn.Parameter]) -> dict[str, torch.Tensor]:
    """Each differentiable part's share of the loss's gradient (on the device); {} for fewer than two."""
    named = {name: part for name, part in parts.items() if part.requires_grad}
    if len(named) < 2:
        return {}
    grads = [_grad(part, params) for part in named.values()]
    total = _grad(loss, params)
    k = len(grads)
    gram = torch.zeros(k, k, dtype=torch.float64, device=loss.device)
    target = torch.zeros(k, dtype=torch.float64, device=loss.device)
    for i in range(k):
        target[i] = _dot(grads[i], total)
        for j in range(i, k):
            gram[i, j] = gram[j, i] = _dot(grads[i], grads[j])
    weights = torch.linalg.lstsq(gram.cpu(), target.cpu().unsqueeze(1)).solution.squeeze(1).to(gram.device)
    sizes = weights.abs() * gram.diagonal().clamp(min=0).sqrt()
    shares = sizes / sizes.sum().clamp(min=1e-30)
    return {name: share.float() for name, share in zip(named, shares)}


def _grad(value: torch.Tensor, params: list[nn.Parameter]) -> list[torch.Tensor | None]:
    return list(torch.autograd.grad(value, params, retain_graph=True, allow_unused=True))


def _dot(a: list[torch.Tensor | None], b: list[torch.Tensor | None]) -> torch.Tensor:
    terms = [(x.double() * y.double()).sum() for x, y in zip(a, b) if x is not None and y is not None]
    return torch.stack(terms).sum() if terms else torch.zeros((), dtype=torch.float64)
