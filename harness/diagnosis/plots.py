"""The report's PNGs. Each plot is drawn only when its metrics were logged (per-layer plots need
the monitors). Figures are built without pyplot, on the Agg canvas: no display, no global state,
safe inside a training process."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from harness.diagnosis.load import RunData, Series

HEALTHY_UPDATE_RATIO = 1e-3  # Karpathy's rule of thumb for |update| / |weight| per step
MAX_LEGEND = 12  # more lines than this get a colour ramp (dark = early layer) instead of a legend
EVENT_COLOURS = {"skip_nonfinite": "tab:red", "skip_spike": "tab:orange", "rollback": "tab:purple",
                 "diverged": "black", "early_stop": "tab:green"}


def make_plots(run: RunData, out_dir: Path) -> list[tuple[str, str]]:
    """Write every plot the run has data for; returns (title, file name) pairs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for title, name, draw in PLOTS:
        fig = Figure(figsize=(8, 4.2), layout="constrained")
        FigureCanvasAgg(fig)
        if draw(run, fig.add_subplot()):
            fig.savefig(out_dir / name, dpi=100)
            made.append((title, name))
    return made


def _loss(run: RunData, ax: Axes) -> bool:
    train, val = run.series("train/loss"), run.series("val/loss", kind="eval")
    if not len(train) and not len(val):
        return False
    _line(ax, train.finite(), "train loss")
    _line(ax, val.finite(), "val loss", marker="o")
    for level, label in ((run.summary.get("chance_loss"), "chance ln K"), (run.summary.get("optimum_loss"), "optimum")):
        if level is not None:
            ax.axhline(level, ls="--", lw=1, color="grey" if label == "optimum" else "tab:red", label=label)
    bad = train.steps[~np.isfinite(train.values)]
    if len(bad):
        for step in bad:
            ax.axvline(step, color="tab:red", lw=0.8)
        ax.plot([], [], color="tab:red", lw=0.8, label="NaN/Inf loss")
    _events(run, ax)
    _log_if_wide(ax, np.concatenate([train.finite().values, val.finite().values]))
    ax.set(xlabel="step", ylabel="loss", title="Loss")
    ax.legend(fontsize=8)
    return True


def _lr(run: RunData, ax: Axes) -> bool:
    lr = run.series("train/lr").finite()
    if not len(lr):
        return False
    _line(ax, lr, "lr")
    ax.set(xlabel="step", ylabel="learning rate", title="Learning rate")
    return True


def _grad_norm(run: RunData, ax: Axes) -> bool:
    pre, post = run.series("grad/norm_preclip").finite(), run.series("grad/norm_postclip").finite()
    if not len(pre):
        return False
    _line(ax, pre, "pre-clip")
    _line(ax, post, "post-clip", ls="--")
    if run.cfg("clip") and run.cfg("clip_mode", "norm") == "norm":
        ax.axhline(float(run.cfg("clip")), color="tab:red", lw=1, label=f"clip = {run.cfg('clip'):g}")
    _log_if_wide(ax, np.concatenate([pre.values, post.values]))
    ax.set(xlabel="step", ylabel="global L2 norm", title="Gradient norm")
    ax.legend(fontsize=8)
    return True


def _per_tensor(prefix: str, ylabel: str, reference: float | None = None) -> Callable[[RunData, Axes], bool]:
    """A plot with one line per tensor/module logged under `prefix`, coloured early -> late."""

    def draw(run: RunData, ax: Axes) -> bool:
        keys = [k for k in run.keys(prefix) if not k.endswith(".bias")]
        if not keys:
            return False
        ramp = colormaps["viridis"](np.linspace(0, 0.9, len(keys)))
        for key, colour in zip(keys, ramp):
            series = run.series(key).finite()
            _line(ax, series, key.split("/", 1)[1], color=colour, lw=1)
        if reference is not None:
            ax.axhline(reference, color="tab:red", ls="--", lw=1, label=f"{reference:g} (rule of thumb)")
        values = np.concatenate([run.series(k).finite().values for k in keys])
        _log_if_wide(ax, values)
        note = "" if len(keys) <= MAX_LEGEND else " (dark = early, yellow = late)"
        ax.set(xlabel="step", ylabel=ylabel, title=f"{ylabel}{note}")
        if len(keys) <= MAX_LEGEND:
            ax.legend(fontsize=6, ncols=2)
        return True

    return draw


def _single(key: str, ylabel: str, log: bool) -> Callable[[RunData, Axes], bool]:
    def draw(run: RunData, ax: Axes) -> bool:
        series = run.series(key).finite()
        if not len(series):
            return False
        _line(ax, series, key)
        if log:
            _log_if_wide(ax, series.values)
        ax.set(xlabel="step", ylabel=ylabel, title=ylabel)
        return True

    return draw


def _line(ax: Axes, series: Series, label: str, marker: str | None = None, **style) -> None:
    if len(series):
        ax.plot(series.steps, series.values, label=label, marker=marker, ms=3, **style)


def _events(run: RunData, ax: Axes) -> None:
    labelled = set()
    for event in run.events:
        colour = EVENT_COLOURS.get(event.get("kind"))
        if colour and event.get("step") is not None:
            label = None if event["kind"] in labelled else event["kind"]
            labelled.add(event["kind"])
            ax.axvline(event["step"], color=colour, ls=":", lw=1, label=label)


def _log_if_wide(ax: Axes, values: np.ndarray) -> None:
    """Log scale when positive values span more than 20x: spikes and vanishing norms stay readable."""
    positive = values[values > 0]
    if len(positive) and positive.max() > 20 * positive.min() and len(positive) == len(values):
        ax.set_yscale("log")
    elif len(positive) and positive.max() > 20 * positive.min():
        ax.set_yscale("symlog", linthresh=float(positive.min()))


PLOTS: tuple[tuple[str, str, Callable[[RunData, Axes], bool]], ...] = (
    ("Train and validation loss", "loss.png", _loss),
    ("Learning rate", "lr.png", _lr),
    ("Gradient norm before and after clipping", "grad_norm.png", _grad_norm),
    ("Gradient norm per parameter tensor", "layer_grad_norms.png", _per_tensor("grad_norm/", "gradient norm")),
    ("Update / parameter ratio per tensor", "update_ratio.png",
     _per_tensor("update_ratio/", "|update| / |weight|", HEALTHY_UPDATE_RATIO)),
    ("Total parameter norm", "param_norm.png", _single("param/norm_total", "parameter norm", log=False)),
    ("Dead ReLU units per layer", "dead_units.png", _per_tensor("act_dead/", "dead-unit fraction")),
    ("fp16 loss scale", "loss_scale.png", _single("train/loss_scale", "loss scale", log=True)),
)
