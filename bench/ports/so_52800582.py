"""Stack Overflow 52800582: regression of y = x^4 for x in [-100, 100), with targets up to 1e8, by
Adam at lr 1e-3; the fix standardises x and y (and uses a ReLU first layer)."""
from __future__ import annotations

import numpy as np
from sklearn.preprocessing import StandardScaler

from .keras_like import Dense, KerasNet
from .standins import Splits, tensors


class Buggy(KerasNet):
    first = "sigmoid"

    def __init__(self) -> None:
        super().__init__((1,), [Dense(50, self.first), Dense(50, "elu"), Dense(1)], "mean_squared_error")


class Fixed(Buggy):
    first = "relu"


def build(standardise: bool = False) -> Splits:
    """The program's 400 points; it validates nothing, so the port validates on the midpoints."""
    x = np.arange(-100, 100, 0.5).reshape(-1, 1)
    x_val = x + 0.25
    y, y_val = x ** 4, x_val ** 4
    if standardise:  # scalers fitted on the training points, as the fix fits them
        x_scaler, y_scaler = StandardScaler().fit(x), StandardScaler().fit(y)
        x, x_val = x_scaler.transform(x), x_scaler.transform(x_val)
        y, y_val = y_scaler.transform(y), y_scaler.transform(y_val)
    return tensors(x, y[:, 0], classification=False), tensors(x_val, y_val[:, 0], classification=False)
