"""Models and data for scripts/pathology_suite.py, written the way a user writes them: plain torch,
no harness imports, reached through `model._target_=suite_models.X` / `data._target_=...`."""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import TensorDataset

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "silu": nn.SiLU}


class Net(nn.Module):
    """A plain feed-forward classifier or regressor: `depth` hidden Linear + activation layers."""

    def __init__(self, in_features: int, num_classes: int | None = None, out_features: int | None = None,
                 hidden: int = 64, depth: int = 2, act: str = "relu") -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = in_features
        for _ in range(depth):
            layers += [nn.Linear(width, hidden), ACTIVATIONS[act]()]
            width = hidden
        layers.append(nn.Linear(width, num_classes or out_features or 1))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.flatten(1))


class SpareHeadNet(Net):
    """A classifier that builds a second head for an experiment and never calls it."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64) -> None:
        super().__init__(in_features, num_classes, hidden=hidden)
        self.aux_head = nn.Linear(hidden, num_classes)


class DetachedBranchNet(nn.Module):
    """A two-branch classifier whose second branch is detached by mistake: it shapes the output but
    never learns."""

    def __init__(self, in_features: int, num_classes: int, hidden: int = 64) -> None:
        super().__init__()
        self.main = nn.Sequential(nn.Linear(in_features, hidden), nn.GELU())
        self.side = nn.Sequential(nn.Linear(in_features, hidden), nn.GELU())
        self.head = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.main(x) + self.side(x).detach())


class CharRNN(nn.Module):
    """A character language model on torch's recurrent layers; `spare=True` also builds a
    projection it never uses."""

    CELLS = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}

    def __init__(self, vocab_size: int, hidden: int = 64, cell: str = "lstm", spare: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.rnn = self.CELLS[cell](hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab_size)
        self.spare = nn.Linear(hidden, hidden) if spare else None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(self.embed(idx))
        return self.head(out)


class PositionOnlyLM(nn.Module):
    """A language model whose forward reads only the positions of its tokens, never their ids (the
    bug of a transform that zeroes the inputs): all it can learn is how often each token occurs."""

    def __init__(self, vocab_size: int, block_size: int, hidden: int = 64) -> None:
        super().__init__()
        self.positions = nn.Embedding(block_size, hidden)
        self.mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, vocab_size))

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device).expand_as(idx)
        return self.mlp(self.positions(pos))


class InputBlindNet(Net):
    """A classifier whose inputs are multiplied by a mask that a bug left at zero."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x.flatten(1) * 0)


def skewed_blobs(n_train: int = 4096, n_val: int = 1024, classes: int = 8, features: int = 16, seed: int = 0):
    """Gaussian blobs with unbalanced classes (each twice as common as the next, from the eighth on
    as common as the eighth, so that every class shows up in both splits): the prior loss, the
    entropy of the class frequencies, sits well below ln K."""
    g = torch.Generator().manual_seed(seed)
    weights = 2.0 ** -torch.arange(classes, dtype=torch.float64).clamp(max=7)
    centres = torch.randn(classes, features, generator=g) * 1.5

    def draw(n: int) -> TensorDataset:
        y = torch.multinomial(weights, n, replacement=True, generator=g)
        return TensorDataset(centres[y] + torch.randn(n, features, generator=g), y)

    return draw(n_train), draw(n_val)
