"""Hydra sweep syntax -> Optuna distributions, settings validation and seeded proposals.
Pure and in-process: nothing is launched."""
from __future__ import annotations

import math
import re
import shlex

import optuna
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from harness.core.errors import ConfigError
from hydra_plugins.harness_optuna_sweeper._settings import parse_settings
from hydra_plugins.harness_optuna_sweeper._space import SearchSpace, parse_search_space
from hydra_plugins.harness_optuna_sweeper._study import (build_sampler, name_override, objective_names, open_study,
                                                         storage_url, study_name)

optuna.logging.set_verbosity(optuna.logging.WARNING)


def space(*overrides: str) -> SearchSpace:
    return parse_search_space(OverridesParser.create().parse_overrides(list(overrides)))


def options(**changes: object) -> dict:
    base = dict(sampler={"name": "tpe"}, pruner={"name": "none"}, direction="minimize",
                n_trials=10, n_jobs=1, seed=None, storage=None, study_name=None, params=None,
                plots=False, tensorboard=False, test_best=False)
    return {**base, **changes}


def proposals(sp: SearchSpace, sampler: optuna.samplers.BaseSampler, n: int) -> list[dict]:
    study = optuna.create_study(sampler=sampler)
    out = []
    for i in range(n):
        trial = study.ask(sp.distributions())
        out.append(trial.params)
        study.tell(trial, float(i % 3))  # a deterministic objective, so runs can be compared
    return out


def test_choice_and_comma_list_are_categorical() -> None:
    sp = space("optim=choice(adamw,sgd)", "clip=0.5,1.0")
    assert sp.distributions() == {
        "optim": CategoricalDistribution(("adamw", "sgd")),
        "clip": CategoricalDistribution((0.5, 1.0)),
    }
    assert sp.overrides({"optim": "sgd", "clip": 1.0}) == ["optim=sgd", "clip=1.0"]


def test_range_end_is_exclusive_like_hydra() -> None:
    sp = space("n=range(1,4)")
    assert sp.distributions()["n"] == IntDistribution(1, 3)
    assert [row["n"] for row in sp.grid()] == [1, 2, 3]
    seen = {p["n"] for p in proposals(sp, optuna.samplers.RandomSampler(seed=0), 60)}
    assert seen == {1, 2, 3}


def test_range_steps_map_to_exactly_hydras_values() -> None:
    assert space("n=range(0,10,3)").distributions()["n"] == IntDistribution(0, 9, step=3)
    assert [r["n"] for r in space("n=range(5,0,-2)").grid()] == [5, 3, 1]
    override = OverridesParser.create().parse_override("x=range(0.1,0.5,0.1)")
    (param,) = parse_search_space([override]).params
    assert param.values == tuple(override.sweep_iterator())  # what Hydra's basic sweeper runs
    assert len(param.values) == 4
    assert isinstance(param.distribution, FloatDistribution) and param.distribution.step
    for value in param.values:  # Optuna's stepping noise is snapped back to Hydra's values
        assert param.text(value + 1e-12) == repr(value)


def test_intervals_float_int_and_log() -> None:
    sp = space("x=interval(0,1)", "k=int(interval(1,8))", "lr=tag(log,interval(1e-4,1e-2))")
    d = sp.distributions()
    assert d["x"] == FloatDistribution(0.0, 1.0)
    assert d["k"] == IntDistribution(1, 8)
    assert d["lr"] == FloatDistribution(1e-4, 1e-2, log=True)
    lrs = [p["lr"] for p in proposals(sp, optuna.samplers.RandomSampler(seed=1), 300)]
    assert all(1e-4 <= v <= 1e-2 for v in lrs)
    # Log-uniform: half the mass below the geometric mean 1e-3 (a uniform draw puts ~9% there).
    below = sum(v < 1e-3 for v in lrs) / len(lrs)
    assert 0.4 < below < 0.6


def test_fixed_overrides_are_forwarded_and_later_keys_win() -> None:
    sp = space("clip=choice(0.5,1.0)", "seed=3", "+extra='a b'", "clip=interval(0.1,2.0)")
    assert sp.fixed == ("seed=3", "+extra='a b'")
    assert sp.distributions() == {"clip": FloatDistribution(0.1, 2.0)}


def test_choice_texts_round_trip_through_hydra_syntax() -> None:
    parser = OverridesParser.create()
    for sweep, expected in [("choice('a b',[1,2],true)", ["a b", [1, 2], True]),
                            ("a,null", ["a", None])]:
        (param,) = space(f"tag={sweep}").params
        texts = [param.text(v) for v in param.values]
        assert [parser.parse_override(f"tag={t}").value() for t in texts] == expected


@pytest.mark.parametrize("override, needle", [
    ("x=tag(lg,interval(0,1))", "unknown tag"),
    ("x=tag(log,choice(1,2))", "applies to interval"),
    ("x=tag(log,interval(0,1))", "positive lower bound"),
    ("x=interval(2,1)", "low < high"),
    ("n=range(4,1)", "range is empty"),
])
def test_bad_sweeps_are_one_line_errors(override: str, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as err:
        space(override)
    assert "\n" not in str(err.value) and override.split("=")[0] in str(err.value)


def test_grid_refuses_intervals_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"x='interval\(0,1\)'.*grid sampler"):
        space("x=interval(0,1)", "n=range(1,3)").grid()


def test_fingerprint_names_the_study_stably() -> None:
    a = space("optim.lr=tag(log,interval(1e-4,1e-2))", "clip=choice(0.5,1.0)")
    again = space("optim.lr=tag(log,interval(1e-4,1e-2))", "clip=choice(0.5,1.0)")
    other = space("optim.lr=tag(log,interval(1e-4,1e-2))", "clip=choice(0.5,2.0)")
    assert a.fingerprint() == again.fingerprint() != other.fingerprint()


def test_default_study_name_reads_as_the_search_and_stays_stable() -> None:
    searched = ("optim.lr=tag(log,interval(1e-4,1e-2))", "clip=choice(0.5,1.0)", "model=mlp")

    def name(*overrides: str, objectives: tuple[str, ...] = ("best_val_loss",), **changes: object) -> str:
        return study_name(parse_settings(options(**changes)), "train", space(*overrides), objectives)

    first = name(*searched)
    assert re.fullmatch(r"train over clip, optim\.lr \[[0-9a-f]{6}\]", first)
    assert name(*searched, n_trials=50, n_jobs=4, sampler={"name": "random"}) == first  # a rerun resumes
    assert name(*searched[:2], "model=gpt") != first  # another fixed override: another study
    assert name(*searched, objectives=("final_val_loss",)) != first
    assert name(*searched, direction="maximize") != first
    assert name(*searched, study_name="mine") == "mine"
    # the override the refusal message suggests pastes back, through the shell, as one plain override
    for study in (first, "mine"):
        words = shlex.split(name_override(study))
        pasted = OverridesParser.create().parse_override(words[0])
        assert len(words) == 1 and not pasted.is_sweep_override() and pasted.value() == study


def test_a_study_named_the_earlier_way_is_resumed_under_its_name(tmp_path) -> None:
    """Sweep dirs from before the readable names resume instead of being refused as foreign."""
    settings = parse_settings(options())
    sp = space("optim.lr=tag(log,interval(1e-4,1e-2))", "clip=choice(0.5,1.0)")
    readable = study_name(settings, "train", sp, ("best_val_loss",))
    earlier = f"train-clip+optim.lr-{readable[-7:-1]}"
    optuna.create_study(storage=storage_url(settings, tmp_path), study_name=earlier)
    assert open_study(settings, sp, tmp_path, "train", ("best_val_loss",)).study_name == earlier
    assert optuna.get_all_study_names(storage_url(settings, tmp_path)) == [earlier]


def test_objective_names_come_from_the_app_config() -> None:
    assert objective_names(OmegaConf.create({"objective": "best_val_loss"})) == ("best_val_loss",)
    assert objective_names(OmegaConf.create({"objective": ["best_val_loss", "wall_time_s"]})) == (
        "best_val_loss", "wall_time_s")
    assert objective_names(OmegaConf.create({"loss": 1.0})) == ()


def test_open_study_names_its_metrics_and_finds_itself_again(tmp_path) -> None:
    settings = parse_settings(options(direction=["minimize", "minimize"], sampler={"name": "nsga2"}))
    sp = space("optim.lr=tag(log,interval(1e-4,1e-2))")
    study = open_study(settings, sp, tmp_path, "train", ("best_val_loss", "wall_time_s"))
    assert study.metric_names == ["best_val_loss", "wall_time_s"]
    again = open_study(settings, sp, tmp_path, "train", ("best_val_loss", "wall_time_s"))
    assert again.study_name == study.study_name and again.metric_names == study.metric_names
    assert optuna.get_all_study_names(storage_url(settings, tmp_path)) == [study.study_name]
    with pytest.raises(ConfigError, match=r"objective=\['best_val_loss'\].*one summary field per "
                                          r"hydra.sweeper.direction"):
        open_study(settings, sp, tmp_path, "train", ("best_val_loss",))


@pytest.mark.parametrize("changes, needle", [
    ({"sampler": {"name": "bayes"}}, "hydra.sweeper.sampler.name='bayes'.*one of"),
    ({"pruner": {"name": "early"}}, "hydra.sweeper.pruner.name='early'"),
    ({"direction": "maximise"}, "hydra.sweeper.direction='maximise'"),
    ({"n_jobs": 0}, "hydra.sweeper.n_jobs=0"),
    ({"n_trials": -1}, "hydra.sweeper.n_trials=-1"),
    ({"sampler": {"name": "cmaes"}, "direction": ["minimize", "minimize"]}, "single-objective"),
    ({"pruner": {"name": "median"}, "direction": ["minimize", "minimize"]}, "cannot prune"),
])
def test_bad_settings_are_one_line_errors(changes: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle) as err:
        parse_settings(options(**changes))
    assert "\n" not in str(err.value)


def test_settings_keep_optuna_defaults_for_unset_arguments() -> None:
    settings = parse_settings(options(sampler={"name": "tpe", "n_startup_trials": 4,
                                               "multivariate": None},
                                      params={"clip": "choice(0.5,1.0)", "seed": 3, "x": None}))
    assert dict(settings.sampler.kwargs) == {"n_startup_trials": 4}
    assert settings.params == ("clip=choice(0.5,1.0)", "seed=3", "x=null")


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_same_seed_same_proposals(sampler: str) -> None:
    sp = space("lr=tag(log,interval(1e-4,1e-2))", "clip=choice(0.5,1.0,2.0)", "n=range(1,6)")
    kwargs = {"name": sampler, "n_startup_trials": 3} if sampler == "tpe" else {"name": sampler}

    def run(seed: int) -> list[dict]:
        settings = parse_settings(options(sampler=dict(kwargs), seed=seed))
        return proposals(sp, build_sampler(settings, n_existing=0), 8)

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_resumed_study_does_not_replay_its_proposals() -> None:
    sp = space("x=interval(0,1)")
    settings = parse_settings(options(sampler={"name": "random"}, seed=0))
    first = proposals(sp, build_sampler(settings, n_existing=0), 3)
    resumed = proposals(sp, build_sampler(settings, n_existing=3), 3)
    assert not any(math.isclose(a["x"], b["x"]) for a in first for b in resumed)


@pytest.mark.parametrize("sampler, needs", [("gp", "scipy"), ("qmc", "scipy"), ("cmaes", "cmaes")])
def test_optional_samplers_propose_or_name_their_missing_package(sampler: str, needs: str) -> None:
    sp = space("x=interval(0,1)", "n=range(1,5)")
    try:
        __import__(needs)
    except ImportError:
        with pytest.raises(ConfigError, match=f"needs {needs}: pip install {needs}"):
            parse_settings(options(sampler={"name": sampler}))
        return
    settings = parse_settings(options(sampler={"name": sampler, "n_startup_trials": 2}
                                      if sampler != "qmc" else {"name": sampler}, seed=0))
    params = proposals(sp, build_sampler(settings, n_existing=0), 4)
    assert all(0 <= p["x"] <= 1 and p["n"] in (1, 2, 3, 4) for p in params)
