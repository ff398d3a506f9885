"""How a skipped update's standout samples are named: the guard writes them into its skip events
and the diagnosis quotes them back, in one format; kept free of torch, so reading a run (the
report, its plots, scripts/diagnose.py) never loads it."""
from __future__ import annotations

from collections.abc import Mapping


def describe_sample(sample: Mapping[str, float | None]) -> str:
    """`17 (loss 3.2e+04, input norm 5.6e+03)`: one sample as the skip events and the report name it."""
    norm = f", input norm {sample['input_norm']:.3g}" if sample.get("input_norm") is not None else ""
    return f"{int(sample['index'])} (loss {sample['loss']:.3g}{norm})"
