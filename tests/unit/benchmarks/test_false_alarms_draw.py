"""bench/false_alarms.py's draw: reproducible per seed, inside the declared working space, and every
family's runs compose. Nothing trains here."""
from __future__ import annotations

import math

import pytest
from conftest import compose_cfg

from bench import false_alarms as bench
from harness.config.run_config import validate_config

DRAW = [bench.draw_run(2024, i) for i in range(400)]
FAMILIES = {f.name: f for f in bench.WORKING_SPACE}


def test_a_draw_repeats_run_for_run_and_does_not_depend_on_how_many_runs_are_drawn():
    assert [bench.draw_run(2024, i) for i in range(5)] == DRAW[:5]
    assert bench.draw_run(2025, 0) != DRAW[0]
    assert len({r.seed for r in DRAW}) > 390  # a fresh seed per run


def test_every_axis_stays_inside_the_space():
    for r in DRAW:
        family = FAMILIES[r.family]
        assert r.optimizer in family.optimizers
        lo, hi = family.lr.get(r.optimizer, bench.OPTIM_LR[r.optimizer])
        top = math.sqrt(lo * hi) if r.batch < bench.LOW_BATCH else hi
        assert lo * 0.999 <= r.lr <= top * 1.001, r
        assert bench.BATCH[0] <= r.batch <= bench.BATCH[1]
        factor = 2 if r.batch < bench.LOW_BATCH else 1
        assert bench.STEPS[0] * factor <= r.steps <= bench.STEPS[1] * factor
        assert r.precision in bench.PRECISIONS and r.schedule in bench.SCHEDULES and r.clip in family.clips
        assert (r.standardize is None) == (not family.standardize)
        if r.family == "resnet-digits" and r.batch < bench.BN_MIN_BATCH:
            assert r.choices["model.norm"] == "group"
        for key, value in r.choices.items():
            assert value in family.choices[key]
        assert f"optim.lr={r.lr:.3g}" in r.overrides and f"batch_size={r.batch}" in r.overrides


def test_the_draw_covers_the_space():
    assert {r.family for r in DRAW} == set(FAMILIES)
    assert {r.precision for r in DRAW} == set(bench.PRECISIONS)
    assert {r.optimizer for r in DRAW} == set(bench.OPTIMIZERS)
    assert {r.standardize for r in DRAW} == {None, False, True}
    batches = [r.batch for r in DRAW]
    assert min(batches) == 1 and max(batches) > 128
    # log-uniform: each octave about as likely (8 octaves in 1..256)
    small = sum(b < 16 for b in batches) / len(batches)
    assert 0.35 < small < 0.65


SOURCES = sorted({(r.family, r.choices.get("data", "")) for r in DRAW})


@pytest.mark.parametrize(("family", "data"), SOURCES, ids=["/".join(s).strip("/") for s in SOURCES])
def test_every_family_composes_on_each_of_its_data(family, data):
    """A run the harness refused would be a crash row, not a measurement."""
    spec = next(r for r in DRAW if (r.family, r.choices.get("data", "")) == (family, data))
    cfg = compose_cfg(list(spec.overrides))
    validate_config(cfg)  # the harness's own config checks, before any training
    assert cfg.trainer.max_steps == spec.steps and cfg.diagnose.abort_on is None and cfg.diagnose.report is False
