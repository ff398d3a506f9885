"""Facts about a run that more than one rule module asks for."""
from __future__ import annotations

from harness.diagnosis.load import RunData

LATE_FRACTION = 2 / 3  # "the last third of the run"
MIN_ROWS = 5  # logged train rows a rule wants before judging a trend


def fp16_unscaled(run: RunData) -> bool:
    """fp16 autocast without a GradScaler: gradients below ~6e-8 round to exactly 0."""
    return run.cfg("precision.name") == "fp16" and run.cfg("precision.loss_scaling", True) is False


def zero_gradient_tensors(run: RunData) -> list[str]:
    """Weight tensors whose gradient norm was exactly 0 on every logged step of the run's last third.
    In float32 a used weight practically never gets an exactly-zero gradient: something cut it off."""
    frozen = []
    for key in run.keys("grad_norm/"):
        if key.endswith("weight"):
            late = run.series(key).after_fraction(LATE_FRACTION).values
            if len(late) and not late.any():
                frozen.append(key.split("/", 1)[1])
    return frozen


def name_some(names: list[str], shown: int = 4) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")
