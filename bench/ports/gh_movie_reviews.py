"""GitHub tautvydasversockas/MovieReviews_Keras: IMDB reviews as 10000-word multi-hot vectors,
Dense 16-16-1 (ReLU, sigmoid) by RMSprop at batch 512 for 4 epochs; the fix adds Dropout(0.5)
after each hidden layer and trains 7 epochs."""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from .keras_like import Dense, Dropout, KerasNet

WORDS = 10000


class Buggy(KerasNet):
    def __init__(self) -> None:
        super().__init__((WORDS,), [Dense(16, "relu"), Dense(16, "relu"), Dense(1, "sigmoid")], "binary_crossentropy")


class Fixed(KerasNet):
    def __init__(self) -> None:
        super().__init__((WORDS,), [Dense(16, "relu"), Dropout(0.5), Dense(16, "relu"), Dropout(0.5),
                                    Dense(1, "sigmoid")], "binary_crossentropy")


class Reviews(Dataset):
    """Synthetic reviews as multi-hot rows (vectorize_sequences): words drawn by a Zipf law, 100-400
    a review, with 300 words twice as likely in positive and 300 in negative reviews."""

    classes = ["negative", "positive"]

    def __init__(self, n: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        base = 1.0 / np.arange(1, WORDS + 1)
        tone = np.zeros(WORDS)
        marked = np.random.default_rng(0).choice(np.arange(50, WORDS), 600, replace=False)
        tone[marked[:300]], tone[marked[300:]] = 1.0, -1.0
        weights = [base * 2.0 ** (-tone / 2), base * 2.0 ** (tone / 2)]  # negative, positive
        cdf = [np.cumsum(w) / w.sum() for w in weights]
        self.labels = rng.integers(0, 2, n)
        lengths = rng.integers(100, 401, n)
        self.words = [np.searchsorted(cdf[label], rng.random(length)).clip(max=WORDS - 1)
                      for label, length in zip(self.labels, lengths)]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        row = torch.zeros(WORDS)
        row[torch.as_tensor(self.words[i])] = 1.0
        return row, int(self.labels[i])


def build() -> tuple[Reviews, Reviews]:
    """IMDB (a download) stands in as 15000 synthetic training reviews and the 10000 the program
    validates on."""
    return Reviews(15000, seed=1), Reviews(10000, seed=2)
