"""The `doctor` config group."""
from __future__ import annotations

from dataclasses import dataclass

from harness.core.typed_config import at_least, setting


@dataclass(frozen=True)
class DoctorConfig:
    overfit_steps: int = setting(200, "an integer >= 1", at_least(1))
    """Updates allowed for memorising one tiny batch; the check stops as soon as it succeeds."""
    overfit_samples: int = setting(4, "an integer >= 1", at_least(1))
    """Samples in that batch: few enough that any working model can memorise them."""
