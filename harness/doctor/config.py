"""The `doctor` config group."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DoctorConfig:
    overfit_steps: int = 200
    """Updates allowed for memorising one tiny batch; the check stops as soon as it succeeds."""
    overfit_samples: int = 4
    """Samples in that batch: few enough that any working model can memorise them."""

    def validate(self) -> list[tuple[str, object, str]]:
        problems: list[tuple[str, object, str]] = []
        for key in ("overfit_steps", "overfit_samples"):
            if getattr(self, key) < 1:
                problems.append((key, getattr(self, key), "an integer >= 1"))
        return problems
