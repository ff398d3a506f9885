"""What a first-time user sees besides the console: `train.py --help`, the TensorBoard layout of
a run, and the per-layer plots of its report."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.custom_scalar import layout_pb2, metadata

from conftest import ROOT, run_cli, train
from harness.diagnosis.load import RunData, load_run
from harness.diagnosis.plots import MAX_LEGEND, PLOTS, draw_figure
from harness.logger.tensorboard import PER_TENSOR_GROUPS, TB_LATER_PREFIX
from harness.logger.tracking import read_metrics

DEPTH = 14  # 15 weight tensors, more than a legend holds


@pytest.fixture(scope="module")
def deep_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short run of a deep MLP with every monitor on and TensorBoard logging."""
    run_dir = tmp_path_factory.mktemp("deep") / "run"
    train(["model=mlp", "data=synthetic", f"model.depth={DEPTH}", "model.width=16", "monitor=full",
           "monitor.every=1", "trainer.max_steps=10", "trainer.log_every=5", "trainer.eval_every=5",
           "schedule.warmup=2", "logger=tensorboard"], run_dir)
    return run_dir


def test_help_names_modes_groups_presets_sweeps_and_torchrun() -> None:
    result = run_cli(["--help"], timeout=60)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for needle in ("stable PyTorch training", "mode=train", "mode=lr_find", "mode=doctor",
                   "optim: adafactor, adam, adamw", "model: gpt, hf_causal_lm, mlp", "group.key=value",
                   "experiment=baby_gpt", "experiment=pathology/", "debug=smoke", "hparams_search=baby_gpt_lr",
                   "-m hydra/sweeper=optuna", "hydra/launcher=torchrun", "README.md"):
        assert needle in text, needle
    assert "Powered by Hydra" not in text  # the project's help, not Hydra's default page
    # every top-level key of conf/train.yaml a user sets by hand is named, with its default
    import yaml

    defaults = yaml.safe_load((ROOT / "conf" / "train.yaml").read_text())
    for key in ("seed", "device", "batch_size", "accum", "clip", "resume", "overwrite", "compile",
                "activation_swap", "output_activation", "objective"):
        shown = str(defaults[key]).lower() if defaults[key] is not None else "null"
        assert f"\n{key}={shown} " in text, key


def test_tensorboard_lists_the_vital_groups_first(deep_run: Path) -> None:
    tags = EventAccumulator(str(deep_run / "tb")).Reload().Tags()["scalars"]
    groups = sorted({tag.split("/", 1)[0] for tag in tags})  # TensorBoard's order for these names
    assert groups[:3] == ["grad", "train", "val"]  # the first two open: grad norm, loss and lr in view
    assert set(groups[3:]) == {TB_LATER_PREFIX + g for g in ("initial", "param", "perf", *PER_TENSOR_GROUPS)} - {
        TB_LATER_PREFIX + "attn_entropy"}  # an MLP has no attention
    # metrics.jsonl, which the diagnosis reads, keeps the plain keys
    assert any(key.startswith("grad_norm/") for row in read_metrics(deep_run) for key in row)


def test_tensorboard_custom_scalars_overview_names_the_vital_tags(deep_run: Path) -> None:
    events = EventAccumulator(str(deep_run / "tb"), size_guidance={"tensors": 0}).Reload()
    (config,) = events.Tensors(metadata.CONFIG_SUMMARY_TAG)
    layout = layout_pb2.Layout.FromString(config.tensor_proto.string_val[0])
    overview = layout.category[0]
    assert overview.title == "overview"
    patterns = [tag for chart in overview.chart for tag in chart.multiline.tag]
    assert patterns == ["train/loss$", "val/loss$", "train/lr$", "grad/norm_preclip$", "grad/norm_postclip$"]
    scalars = events.Tags()["scalars"]
    for chart in (c for category in layout.category for c in category.chart if c.title != "attn_entropy"):
        for pattern in chart.multiline.tag:  # TensorBoard matches each one from the start of a tag
            assert any(re.match(pattern, tag) for tag in scalars), (chart.title, pattern)


def test_per_layer_plot_past_the_legend_limit_names_layers_on_a_colour_bar(deep_run: Path) -> None:
    run = load_run(deep_run)
    title, _, draw = next(p for p in PLOTS if p[1] == "layer_grad_norms.png")
    fig = draw_figure(run, title, draw)
    ax, colour_bar = fig.axes
    names = [k.split("/", 1)[1] for k in run.keys("grad_norm/") if not k.endswith(".bias")]
    assert len(names) > MAX_LEGEND
    bar_labels = [t.get_text() for t in colour_bar.get_yticklabels()]
    assert bar_labels[0] == names[0] == "stem.0.weight" and bar_labels[-1] == names[-1] == "head.weight"
    assert set(bar_labels) <= set(names) and len(bar_labels) >= 3
    last = {name: run.series(f"grad_norm/{name}").values[-1] for name in names}
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"▲ {max(last, key=last.get)}" in legend and f"▼ {min(last, key=last.get)}" in legend
    assert len(legend) <= MAX_LEGEND


def test_per_layer_plot_within_the_legend_limit_names_every_layer(tmp_path: Path) -> None:
    names = [f"hidden.{i}.linear.weight" for i in range(4)]
    rows = [{"step": s, "kind": "train", **{f"grad_norm/{n}": 0.1 * (i + 1) for i, n in enumerate(names)}}
            for s in (10, 20)]
    run = RunData(tmp_path, {}, {}, rows, [], list(rows[0]))
    title, _, draw = next(p for p in PLOTS if p[1] == "layer_grad_norms.png")
    fig = draw_figure(run, title, draw)
    assert len(fig.axes) == 1  # no colour bar
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == names
