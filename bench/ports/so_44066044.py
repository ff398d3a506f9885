"""Stack Overflow 44066044: a binary classifier of network packets whose output unit is a ReLU
under binary cross-entropy, on raw columns; the fix is a sigmoid output on scaled columns."""
from __future__ import annotations

from sklearn.preprocessing import scale

from .keras_like import Dense, KerasNet
from .standins import Splits, split, tabular

# raw packet columns: ports, sizes, counts, durations, flags
SCALES = [30000.0, 30000.0, 800.0, 1500.0, 60.0, 20.0, 5000.0, 2.0, 1.0, 300.0, 10.0]


class Buggy(KerasNet):
    out = "relu"

    def __init__(self) -> None:
        layers = [Dense(12, "relu", "normal"), Dense(12, "relu", "normal"), Dense(1, self.out, "normal")]
        super().__init__((11,), layers, "binary_crossentropy")


class Fixed(Buggy):
    out = "sigmoid"


def build(scaled: bool = False) -> Splits:
    """NetworkPackets.csv is not in the benchmark: 1250 rows of 11 raw packet columns with a binary
    label; the program scores its training rows, the port holds out a fifth of them."""
    x, y = tabular(1250, SCALES, seed=4)
    if scaled:
        x = scale(x)
    return split(x, y, test_size=0.2, seed=4, classification=True)
