"""DeepFD's Stack Overflow 51181393 (ArabelaTso/DeepFD, Benchmark-with-patches.xlsx No. 45): one linear unit
fitting y = 5x on 100 points of [1, 2] under the mean squared error, trained by Keras' RMSprop at its default
lr 1e-3 for 200 epochs, which moves the weight and bias by about 1e-3 a step while they must travel several
units. DeepFD's patch: RMSprop(lr=0.1). Program text: the question's program (anon3173/KUnit,
Benchmark_Empirical_Evaluation/51181393/51181393.py) in DeepFD's subject form (testingautomated-usi/
dl-fl-repair, fl/subjects/fault_files/D7.py), which holds out a fifth of the points."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .keras_like import Dense, build_layers
from .standins import Splits, split


class Net(nn.Module):
    """Dense(1, activation='linear', input_dim=1): a glorot-uniform weight, a zero bias. The fix is the
    optimizer's LR only, so both runs use this model."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = build_layers((1,), [Dense(1, "linear")])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def build() -> Splits:
    """The program's data: x = linspace(1, 2, 100), y = 5x; DeepFD's subject splits it with
    train_test_split(test_size=0.2, random_state=42): 80 points train, 20 validate."""
    x = np.linspace(1, 2, 100).reshape(-1, 1)
    return split(x, x * 5, test_size=0.2, seed=42, classification=False)
