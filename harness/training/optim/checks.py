"""Constructor checks shared by the optimizers written here, with torch's wording."""
from __future__ import annotations


def check_hyperparameters(lr: float, betas: tuple[float, float], weight_decay: float) -> None:
    if not lr > 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise ValueError(f"betas must be two numbers in [0, 1), got {betas}")
    if not weight_decay >= 0:
        raise ValueError(f"weight_decay must be >= 0, got {weight_decay}")
