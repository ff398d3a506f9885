"""What the LR range test leaves behind: RUN_DIR/lr_find.json, RUN_DIR/lr_find.png and one console line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.config.lr_find import LRFindConfig
from harness.modes.lr_find.suggest import RULE, Suggestion
from harness.modes.lr_find.sweep import Sweep


def override(lr: float) -> str:
    """The command-line override that applies the suggestion."""
    return f"optim.lr={lr:.1e}"


def summary_line(suggestion: Suggestion, sweep: Sweep) -> str:
    text = (f"lr_find: suggested LR {suggestion.lr:.1e} -> use {override(suggestion.lr)} "
            f"(steepest descent at {_fmt(suggestion.steepest_lr)}, loss minimum at {suggestion.minimum_lr:.1e}; "
            f"{len(sweep.lrs)} steps, {sweep.stop_reason})")
    return f"{text}; {suggestion.note}" if suggestion.note else text


def _fmt(lr: float | None) -> str:
    return "none" if lr is None else f"{lr:.1e}"


def as_json(sweep: Sweep, suggestion: Suggestion, settings: LRFindConfig) -> dict[str, Any]:
    return {
        "suggestion": suggestion.lr,
        "override": override(suggestion.lr),
        "steepest_lr": suggestion.steepest_lr,
        "minimum_lr": suggestion.minimum_lr,
        "rule": RULE,
        "note": suggestion.note,
        "stop_reason": sweep.stop_reason,
        "settings": vars(settings),
        "lrs": sweep.lrs,
        "losses": sweep.losses,
        "smoothed": sweep.smoothed,
        "curve": suggestion.curve,
    }


def write_json(data: dict[str, Any], path: Path) -> None:
    path.write_text(json.dumps(data, indent=2))


def plot(sweep: Sweep, suggestion: Suggestion, path: Path) -> None:
    """Loss vs LR on a log axis: raw losses, the EMA, the centred curve, the suggestion and the minimum."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed, and none of the user's interactive backends
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(sweep.lrs, sweep.losses, color="0.75", lw=0.8, label="loss (per update)")
    ax.plot(sweep.lrs, sweep.smoothed, color="tab:blue", lw=1, alpha=0.6, label="EMA (stop rule)")
    ax.plot(sweep.lrs, suggestion.curve, color="tab:blue", lw=2, label="centred smoothing (suggestion rule)")
    ax.axvline(suggestion.lr, color="tab:red", ls="--", label=f"suggestion {suggestion.lr:.1e}")
    ax.axvline(suggestion.minimum_lr, color="0.4", ls=":", label=f"loss minimum {suggestion.minimum_lr:.1e}")
    if suggestion.steepest_lr is not None and suggestion.steepest_lr != suggestion.lr:
        ax.axvline(suggestion.steepest_lr, color="tab:orange", ls="-.", label=f"steepest {suggestion.steepest_lr:.1e}")
    ax.set_xscale("log")
    low, high = min(suggestion.curve), max(sweep.losses[0], suggestion.curve[0])
    ax.set_ylim(low - 0.1 * (high - low), high + 0.3 * (high - low))  # the divergence tail would squash the rest
    ax.set_xlabel("learning rate (optim.lr)")
    ax.set_ylabel("training loss")
    ax.set_title("LR range test")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
