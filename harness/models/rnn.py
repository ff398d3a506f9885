"""A character/token language model on a recurrent core (LSTM, GRU or a plain tanh RNN).

Backpropagation through time multiplies the gradient by the recurrent Jacobian once per step of
the window, so recurrent models are where gradients explode; the field's answer is clipping
(clip 0.5-1.0), which the `rnn_exploding` pathology preset shows by leaving it off.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from harness.models.checks import Problem, size_and_dropout_problems

CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}


@dataclass
class RNNConfig:
    vocab_size: int = 0
    """Filled in from the data."""
    block_size: int = 64
    """The data's window length: how many steps gradients flow back through (truncated BPTT)."""
    cell: str = "lstm"
    """lstm | gru | rnn (a plain tanh RNN: the one whose gradients explode or vanish fastest)."""
    n_layer: int = 2
    hidden: int = 256
    """Hidden state size of every layer."""
    n_embd: int = 128
    """Token embedding size."""
    dropout: float = 0.0
    """Between recurrent layers and before the output head (Zaremba et al. use 0.2-0.5 on small corpora)."""
    recurrent_gain: float | None = None
    """null keeps torch's uniform init of the recurrent weights; a number makes each layer's
    hidden-to-hidden matrix orthogonal times this gain, so its spectral radius is the gain: 1.0
    keeps the signal's size through time (Saxe et al.), above 1 gradients grow with every step
    they flow back through (the exploding regime), below 1 they shrink."""

    def problems(self) -> list[Problem]:
        problems = size_and_dropout_problems(self, ("block_size", "n_layer", "hidden", "n_embd"))
        if self.cell not in CELLS:
            problems.append(("cell", self.cell, f"one of {sorted(CELLS)}"))
        if self.recurrent_gain is not None and not self.recurrent_gain > 0:
            problems.append(("recurrent_gain", self.recurrent_gain, "null or a number > 0"))
        return problems


class RNNLM(nn.Module):
    fsdp_units = ("LSTM", "GRU", "RNN")  # parallel=fsdp shards each of these as a unit: the recurrent stack
    Config = RNNConfig

    def __init__(self, cfg: RNNConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.n_layer = cfg.n_layer
        self.embed = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.rnn = CELLS[cfg.cell](cfg.n_embd, cfg.hidden, num_layers=cfg.n_layer, batch_first=True,
                                   dropout=cfg.dropout if cfg.n_layer > 1 else 0.0)
        self.drop = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.hidden, cfg.vocab_size)
        if cfg.recurrent_gain is not None:
            self._orthogonal_recurrence(cfg.recurrent_gain)

    @torch.no_grad()
    def _orthogonal_recurrence(self, gain: float) -> None:
        """LSTM and GRU stack one square block per gate in weight_hh: each gate gets its own."""
        for layer in range(self.n_layer):
            weight = getattr(self.rnn, f"weight_hh_l{layer}")
            for block in weight.split(self.cfg.hidden):
                nn.init.orthogonal_(block, gain=gain)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """[batch, time] token ids -> [batch, time, vocab] logits; every window starts from a zero state."""
        x = self.embed(idx)
        if x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            # oneDNN has no bf16/fp16 LSTM kernel for every shape: on CPU the recurrence stays fp32
            with torch.autocast("cpu", enabled=False):
                out, _ = self.rnn(x.float())
        else:
            out, _ = self.rnn(x)
        return self.head(self.drop(out))
