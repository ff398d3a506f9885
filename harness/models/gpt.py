"""Decoder-only transformer in nanoGPT's shape, with the stability switches practitioners reach for."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from harness.models.checks import Problem, size_and_dropout_problems


@dataclass
class GPTConfig:
    vocab_size: int = 0
    """Filled in from the data."""
    block_size: int = 64
    """Context length; also the data's window length."""
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    """Off by default: small models on lots of data do not overfit, and dropout slows learning."""
    bias: bool = False
    """Biases in Linear and LayerNorm; nanoGPT found them unnecessary and slightly worse."""
    ln_position: str = "pre"
    """pre: LayerNorm before each sublayer (stable); post: after the residual add (original, needs warmup)."""
    qk_norm: bool = False
    """LayerNorm on per-head queries and keys, which bounds attention logits."""
    tie_embeddings: bool = False
    """Share the token embedding with the output head (GPT-2 practice). Off by default: a tied,
    untrained model favours echoing its input token, so its first loss sits below ln(vocab)."""
    activation_checkpointing: bool = False
    """Recompute each block in backward: less activation memory for ~30% more compute."""

    def problems(self) -> list[Problem]:
        problems = size_and_dropout_problems(self, ("block_size", "n_layer", "n_head", "n_embd"))
        if self.n_head >= 1 and self.n_embd % self.n_head:
            problems.append(("n_embd", self.n_embd, f"a multiple of n_head={self.n_head}"))
        if self.ln_position not in ("pre", "post"):
            problems.append(("ln_position", self.ln_position, "pre or post"))
        return problems


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.n_head, self.head_dim = cfg.n_head, cfg.n_embd // cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.c_proj.is_residual_projection = True
        self.q_norm = nn.LayerNorm(self.head_dim, bias=cfg.bias) if cfg.qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim, bias=cfg.bias) if cfg.qk_norm else nn.Identity()
        self.dropout = cfg.dropout
        self.resid_dropout = nn.Dropout(cfg.dropout)
        # Set by the full-level monitor on logging steps only: the fused kernel never
        # materialises the attention matrix, so its entropy costs an extra pass.
        self.record_entropy = False
        self.last_entropy: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))
        q, k = self.q_norm(q), self.k_norm(k)
        if self.record_entropy:
            self.last_entropy = self._attention_entropy(q.detach(), k.detach())
        y = F.scaled_dot_product_attention(
            q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


    @staticmethod
    def _attention_entropy(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """Mean entropy (nats) of each head's causal attention distribution: near 0 means a head
        attends to one token (possible collapse), near ln(T) means it attends uniformly."""
        T = q.size(-2)
        scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.size(-1))
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
        logp = scores.masked_fill(~mask, float("-inf")).log_softmax(-1)
        entropy = -(logp.exp() * logp.masked_fill(~mask, 0.0)).sum(-1)  # [B, H, T]
        return entropy.mean(dim=(0, 2))


class FeedForward(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.c_proj.is_residual_projection = True
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.pre_ln = cfg.ln_position == "pre"
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = FeedForward(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.pre_ln:
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))
        x = self.ln_1(x + self.attn(x))
        return self.ln_2(x + self.mlp(x))


class GPT(nn.Module):
    fsdp_units = ("Block",)  # parallel=fsdp shards each of these as a unit: transformer blocks
    Config = GPTConfig

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.n_layer = cfg.n_layer
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        # Post-LN blocks already end in a LayerNorm; a second one would be redundant.
        self.ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias) if cfg.ln_position == "pre" else nn.Identity()
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.wte.weight
        self.reset_parameters(std=0.02)

    def reset_parameters(self, std: float) -> None:
        """nanoGPT/GPT-2 init: normal(std), residual projections std/sqrt(2 n_layer), so the
        residual stream's variance does not grow with depth and the first loss is ~ln(vocab)."""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                scale = math.sqrt(2 * self.n_layer) if getattr(module, "is_residual_projection", False) else 1.0
                nn.init.normal_(module.weight, mean=0.0, std=std / scale)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        if T > self.cfg.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.cfg.block_size}")
        pos = torch.arange(T, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.blocks:
            if self.cfg.activation_checkpointing and self.training:
                x = checkpoint(block, x, use_reentrant=False)
            else:
                x = block(x)
        return self.lm_head(self.ln_f(x))
