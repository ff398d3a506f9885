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
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullFormatter

from harness.diagnosis.load import RunData, Series
from harness.diagnosis.rules.gradients import VANISH_RATIO, block_ratio_series
from harness.core.metric_names import (ACT_DEAD, GRAD_NORM, GRAD_NORM_POSTCLIP, GRAD_NORM_PRECLIP, PARAM_NORM_TOTAL,
                                  TRAIN_LOSS, TRAIN_LOSS_SCALE, TRAIN_LR, UPDATE_RATIO, VAL_LOSS)

HEALTHY_UPDATE_RATIO = 1e-3  # Karpathy's rule of thumb for |update| / |weight| per step
MAX_LEGEND = 12  # more lines than this get a colour bar naming the layers, and a legend of the extremes
N_EXTREMES = 3  # lines named at each end (highest, lowest) when there are more than MAX_LEGEND
MAX_BAR_LABELS = 10  # tensor names written on the colour bar
COLOUR_BAR_ROOM = 0.25  # figure width taken from the axes for the colour bar and its labels
WIDE_RANGE = 20.0  # positive values spanning more than this factor get a log axis
EVENT_COLOURS = {"skip_nonfinite": "tab:red", "skip_spike": "tab:orange", "rollback": "tab:purple",
                 "diverged": "black", "early_stop": "tab:green"}

Draw = Callable[[RunData, Axes], bool]


def make_plots(run: RunData, out_dir: Path) -> list[tuple[str, str]]:
    """Write every plot the run has data for; returns (title, file name) pairs."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for title, name, draw in PLOTS:
        fig = draw_figure(run, title, draw)
        if fig is not None:
            fig.savefig(out_dir / name, dpi=100)
            made.append((title, name))
    return made


def draw_figure(run: RunData, title: str, draw: Draw) -> Figure | None:
    """One plot on a figure of its own, or None when the run did not log its metrics."""
    fig = Figure(figsize=(8, 4.2))
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.12, top=0.92)  # fixed margins: a layout engine costs 2x
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if not draw(run, ax):
        return None
    ax.set_title(title)
    handles = ax.get_legend_handles_labels()[0]
    if handles and ax.get_legend() is None:
        ax.legend(fontsize=7, ncols=2 if len(handles) > 6 else 1)
    return fig


def _loss(run: RunData, ax: Axes) -> bool:
    train, val = run.series(TRAIN_LOSS), run.series(VAL_LOSS, kind="eval")
    if not len(train) and not len(val):
        return False
    _line(ax, train.finite(), "train loss")
    _line(ax, val.finite(), "val loss", marker="o")
    _scale_for(ax, np.concatenate([train.finite().values, val.finite().values]))
    for level, label, colour in ((run.summary.get("chance_loss"), "chance ln K", "tab:red"),
                                 (run.summary.get("optimum_loss"), "known optimum", "grey")):
        if level is not None and (level > 0 or ax.get_yscale() == "linear"):
            ax.axhline(level, ls="--", lw=1, color=colour, label=label)
    for i, step in enumerate(train.steps[~np.isfinite(train.values)]):
        ax.axvline(step, color="tab:red", lw=0.8, label=None if i else "NaN/Inf train loss")
    _events(run, ax)
    ax.set(xlabel="step", ylabel="loss")
    return True


def _lr(run: RunData, ax: Axes) -> bool:
    lr = run.series(TRAIN_LR).finite()
    _line(ax, lr, "lr")
    ax.set(xlabel="step", ylabel="learning rate")
    return bool(len(lr))


def _grad_norm(run: RunData, ax: Axes) -> bool:
    pre, post = run.series(GRAD_NORM_PRECLIP).finite(), run.series(GRAD_NORM_POSTCLIP).finite()
    clipped = run.cfg("clip") is not None
    _line(ax, pre, "pre-clip" if clipped else "no clipping (clip=null)")
    if clipped:  # without clipping the post-clip norm is the same line drawn twice
        _line(ax, post, "post-clip", ls="--")
    if run.cfg("clip") and run.cfg("clip_mode", "norm") == "norm":
        ax.axhline(float(run.cfg("clip")), color="tab:red", lw=1, label=f"clip = {run.cfg('clip'):g}")
    _scale_for(ax, np.concatenate([pre.values, post.values]))
    ax.set(xlabel="step", ylabel="global L2 norm")
    return bool(len(pre))


def _block_ratio(run: RunData, ax: Axes) -> bool:
    ratio = block_ratio_series(run)
    finite = ratio.finite()
    _line(ax, finite, "last block / first block")
    zero = ratio.steps[~np.isfinite(ratio.values)]
    if len(zero):
        top = max(VANISH_RATIO, float(finite.values.max()) if len(finite) else 1.0) * 10
        ax.plot(zero, np.full(len(zero), top), "^", color="tab:red", label="first block's gradient exactly 0")
    ax.axhline(VANISH_RATIO, color="tab:red", ls="--", lw=1, label=f"vanishing_gradients above {VANISH_RATIO:g}")
    ax.axhline(1.0, color="grey", lw=0.8)
    _log_axis(ax, "log")
    ax.set(xlabel="step", ylabel="norm ratio (median over weights)")
    return bool(len(ratio))


def _per_tensor(prefix: str, ylabel: str, reference: float | None = None) -> Draw:
    """One line per tensor/module logged under `prefix` (biases left out), coloured early -> late.
    Up to MAX_LEGEND lines are named in the legend; past that a colour bar names the layers and
    the legend names only the lines that end highest and lowest, the ones a reader looks for."""

    def draw(run: RunData, ax: Axes) -> bool:
        keys = [k for k in run.keys(prefix) if not k.endswith(".bias")]
        if not keys:
            return False
        names = [k.split("/", 1)[1] for k in keys]
        series = [run.series(k).finite() for k in keys]
        ramp = colormaps["viridis"](np.linspace(0, 0.9, len(keys)))
        labels = names if len(keys) <= MAX_LEGEND else _extreme_labels(names, series)
        for line, label, colour in zip(series, labels, ramp):
            _line(ax, line, label, color=colour, lw=1)
        if reference is not None:
            ax.axhline(reference, color="tab:red", ls="--", lw=1, label=f"{reference:g} (rule of thumb)")
        _scale_for(ax, np.concatenate([line.values for line in series]))
        if len(keys) > MAX_LEGEND:
            _layer_colour_bar(ax, names, ramp)
            if ax.get_legend_handles_labels()[0]:  # none when every value was NaN/Inf
                ax.legend(fontsize=6, ncols=2, title="▲ highest, ▼ lowest at the last step", title_fontsize=6)
        ax.set(xlabel="step", ylabel=ylabel)
        return True

    return draw


def _extreme_labels(names: list[str], series: list[Series]) -> list[str | None]:
    """Legend labels for the N_EXTREMES lines that end highest (▲) and lowest (▼); None for the rest."""
    ends = sorted((line.values[-1], i) for i, line in enumerate(series) if len(line))
    labels: list[str | None] = [None] * len(names)
    for _, i in ends[:N_EXTREMES]:
        labels[i] = f"▼ {names[i]}"
    for _, i in ends[-N_EXTREMES:]:
        labels[i] = f"▲ {names[i]}"
    return labels


def _layer_colour_bar(ax: Axes, names: list[str], colours: np.ndarray) -> None:
    """A colour bar right of the axes, one colour per tensor, labelled with tensor names
    (first, last and evenly spaced ones between), first layer at the top."""
    left, bottom, width, height = ax.get_position().bounds
    ax.set_position((left, bottom, width - COLOUR_BAR_ROOM, height))
    cax = ax.figure.add_axes((left + width - COLOUR_BAR_ROOM + 0.015, bottom, 0.015, height))
    bounds = np.arange(len(names) + 1) - 0.5
    mappable = ScalarMappable(norm=BoundaryNorm(bounds, len(names)), cmap=ListedColormap(colours))
    bar = ax.figure.colorbar(mappable, cax=cax)
    ticks = np.unique(np.linspace(0, len(names) - 1, min(len(names), MAX_BAR_LABELS)).round().astype(int))
    bar.set_ticks(ticks, labels=[names[i] for i in ticks], fontsize=6)
    bar.minorticks_off()  # one colour per tensor: minor ticks mean nothing and cost a third of the figure
    bar.ax.invert_yaxis()


def _single(key: str, ylabel: str) -> Draw:
    def draw(run: RunData, ax: Axes) -> bool:
        series = run.series(key).finite()
        _line(ax, series, None)
        _scale_for(ax, series.values)
        ax.set(xlabel="step", ylabel=ylabel)
        return bool(len(series))

    return draw


def _line(ax: Axes, series: Series, label: str | None, marker: str | None = None, **style) -> None:
    if len(series):
        ax.plot(series.steps, series.values, label=label, marker=marker, ms=3, **style)


def _events(run: RunData, ax: Axes) -> None:
    labelled = set()
    for event in run.events:
        colour = EVENT_COLOURS.get(event.get("kind"))
        if colour and event.get("step") is not None:
            ax.axvline(event["step"], color=colour, ls=":", lw=1,
                       label=None if event["kind"] in labelled else event["kind"])
            labelled.add(event["kind"])


def _scale_for(ax: Axes, values: np.ndarray) -> None:
    """Log axis when positive values span more than WIDE_RANGE (spikes and vanishing norms stay
    readable); symlog when exact zeros must stay visible too."""
    positive = values[values > 0]
    if not len(positive) or positive.max() <= WIDE_RANGE * positive.min():
        return
    if len(positive) == len(values):
        _log_axis(ax, "log")
    else:
        _log_axis(ax, "symlog", linthresh=float(positive.min()))


def _log_axis(ax: Axes, scale: str, **options) -> None:
    """A log-type y axis with plain-text tick labels ("0.001", "1e+05"): matplotlib's default
    mathtext labels cost more to typeset than the rest of the figure."""
    ax.set_yscale(scale, **options)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


PLOTS: tuple[tuple[str, str, Draw], ...] = (
    ("Train and validation loss", "loss.png", _loss),
    ("Learning rate", "lr.png", _lr),
    ("Gradient norm before and after clipping", "grad_norm.png", _grad_norm),
    ("Gradient norm per parameter tensor", "layer_grad_norms.png", _per_tensor(GRAD_NORM, "gradient norm")),
    ("Late / early block gradient norm", "block_grad_ratio.png", _block_ratio),
    ("Update / parameter ratio per tensor", "update_ratio.png",
     _per_tensor(UPDATE_RATIO, "|update| / |weight|", HEALTHY_UPDATE_RATIO)),
    ("Total parameter norm", "param_norm.png", _single(PARAM_NORM_TOTAL, "parameter norm")),
    ("Dead ReLU units per layer", "dead_units.png", _per_tensor(ACT_DEAD, "dead-unit fraction")),
    ("fp16 loss scale", "loss_scale.png", _single(TRAIN_LOSS_SCALE, "loss scale")),
)
