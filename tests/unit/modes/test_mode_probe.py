"""Start-up: Hydra's mode probe (a whole second composition) is skipped only when it cannot matter."""
from __future__ import annotations

import pytest

from conftest import run_cli
from harness.entry.cli import parse_command_line
from harness.entry.mode_probe import MAX_SCANNED, mode_decided_by_command_line


@pytest.mark.parametrize("argv,decided", [
    (["optim=adamw", "clip=1.0"], True),  # this project's config files never set hydra.mode
    (["-m", "optim.lr=1e-3,1e-2"], True),
    (["hydra.mode=MULTIRUN", "optim.lr=1e-3,1e-2"], False),  # an override can ask for a sweep
    (["+hydra.mode=RUN"], False),
    (["hydra.searchpath=[pkg://somewhere]"], False),  # a search path this check cannot read
])
def test_the_probe_is_skipped_only_when_no_config_or_override_sets_the_mode(argv, decided):
    assert mode_decided_by_command_line(parse_command_line(argv)) is decided


def test_a_config_dir_that_sets_multirun_keeps_the_probe(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "sweep.yaml").write_text("# @package _global_\nhydra:\n  mode: MULTIRUN\n")
    assert not mode_decided_by_command_line(parse_command_line([f"hydra.searchpath=[file://{tmp_path}]"]))
    plain = tmp_path / "plain" / "experiment"
    plain.mkdir(parents=True)
    (plain / "wide.yaml").write_text("# @package _global_\nmodel:\n  width: 64\n")
    assert mode_decided_by_command_line(parse_command_line([f"hydra.searchpath=[file://{plain.parent}]"]))


def test_hydra_mode_multirun_in_a_config_file_still_sweeps_without_dash_m(tmp_path):
    """What the probe exists for keeps working: a config file's hydra.mode=MULTIRUN runs a sweep."""
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "two_seeds.yaml").write_text(
        "# @package _global_\nhydra:\n  mode: MULTIRUN\n  sweeper:\n    params:\n      seed: 1,2\n  sweep:\n    dir: "
        + str(tmp_path / "sweep") + "\n")
    result = run_cli([f"hydra.searchpath=[file://{tmp_path}]", "experiment=two_seeds", "model=mlp",
                      "data=synthetic", "debug=smoke", "trainer.max_steps=2", "diagnose=false"],
                     cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in (tmp_path / "sweep").iterdir() if p.is_dir()) == ["0", "1"]


def test_a_search_path_too_large_to_read_quickly_keeps_the_probe(tmp_path):
    """A project root on the search path (every run's .hydra/ files below it) is not read through."""
    for i in range(MAX_SCANNED + 1):
        (tmp_path / f"c{i}.yaml").write_text("lr: 1\n")
    assert not mode_decided_by_command_line(parse_command_line([f"hydra.searchpath=[file://{tmp_path}]"]))
