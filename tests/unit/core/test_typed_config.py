"""The one way config nodes are checked: a dataclass whose fields carry their checks."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
import yaml
from omegaconf import OmegaConf

from conftest import CONF, compose_cfg

from harness.core.errors import ConfigError
from harness.core.typed_config import Problem, at_least, one_of, read_typed, setting, within


@dataclass(frozen=True)
class Demo:
    steps: int = setting(10, "an integer >= 1", at_least(1))
    rate: float = setting(0.5, "a number in (0, 1]", within(0.0, 1.0, low_open=True))
    limit: int | None = setting(None, "null (off) or an integer >= 1", at_least(1))
    kind: str = setting("a", "one of ['a', 'b']", one_of(("a", "b")))
    flag: bool = False  # no text of its own: described by its type
    low: int = 0

    def problems(self) -> list[Problem]:
        return [("low", self.low, f"< demo.steps={self.steps}")] if self.low >= self.steps else []


def _error(node: dict) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        read_typed(OmegaConf.create(node), Demo, "demo")
    return info.value


def test_unknown_keys_are_refused_only_when_asked():
    node = OmegaConf.create({"stepz": 3})
    assert read_typed(node, Demo, "demo") == Demo()  # config_keys.py judges keys against the option's file
    with pytest.raises(ConfigError) as info:
        read_typed(node, Demo, "demo", only_known_keys=True)
    assert info.value.key == "demo.stepz" and info.value.allowed == "a key of ['steps', 'rate', 'limit', 'kind', " \
                                                                    "'flag', 'low']"


def test_defaults_fill_absent_keys_and_numbers_become_floats():
    settings = read_typed(OmegaConf.create({"rate": 1, "limit": 3}), Demo, "demo")
    assert settings == Demo(rate=1.0, limit=3) and isinstance(settings.rate, float)
    assert read_typed(None, Demo, "demo") == Demo()


@pytest.mark.parametrize("node,key,allowed", [
    ({"steps": 0}, "demo.steps", "an integer >= 1"),
    ({"steps": 2.5}, "demo.steps", "an integer >= 1"),
    ({"steps": True}, "demo.steps", "an integer >= 1"),  # YAML's true is not a count
    ({"rate": 0}, "demo.rate", "a number in (0, 1]"),
    ({"rate": "fast"}, "demo.rate", "a number in (0, 1]"),
    ({"limit": 0}, "demo.limit", "null (off) or an integer >= 1"),
    ({"kind": "c"}, "demo.kind", "one of ['a', 'b']"),
    ({"flag": "yes"}, "demo.flag", "true or false"),
    ({"low": None}, "demo.low", "an integer"),
    ({"low": 10}, "demo.low", "< demo.steps=10"),
])
def test_each_failure_is_one_line_naming_the_key_the_value_and_what_is_allowed(node, key, allowed):
    err = _error(node)
    assert err.key == key and err.allowed == allowed and err.value == next(iter(node.values()))
    shown = "true" if err.value is True else repr(err.value)  # a bool as it is typed on the command line
    assert str(err) == f"{key}={shown} is invalid: {allowed}"


# Every node a schema reads, with the option that selects it where the group has several.
SCHEMAS = [("monitor", "harness.training.monitor.MonitorConfig", None),
           ("early_stop", "harness.training.early_stop.EarlyStopConfig", None),
           ("perf", "harness.training.perf.PerfConfig", None),
           ("fault", "harness.training.faults.FaultConfig", None),
           ("schedule", "harness.training.schedule.ScheduleConfig", None),
           ("guard", "harness.training.guard.GuardConfig", None),
           ("precision", "harness.training.precision.PrecisionConfig", None),
           ("scale_lr", "harness.training.scale_lr.ScaleLRConfig", None),
           ("parallel", "harness.training.parallel.ParallelConfig", None),
           ("loss", "harness.training.loss.LossConfig", None),
           ("init", "harness.models.init.InitConfig", None),
           ("trainer", "harness.loop.cadence.TrainerConfig", None),
           ("doctor", "harness.config.doctor.DoctorConfig", None),
           ("lr_find", "harness.config.lr_find.LRFindConfig", None),
           ("diagnose", "harness.diagnosis.live.DiagnoseSettings", None),
           ("data", "harness.data.LoadingConfig", None),
           ("data", "harness.data.synthetic.SyntheticConfig", "data=synthetic"),
           ("data", "harness.data.digits.DigitsConfig", "data=digits")]
# Groups whose every option a single schema reads: each key an option file sets must be one of its.
GROUP_SCHEMAS = {node: path for node, path, option in SCHEMAS if option is None and node not in ("data",)}


def _schema(path: str) -> type:
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def _defaults(schema: type) -> dict:
    import dataclasses

    return {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
            for f in dataclasses.fields(schema)}


@pytest.mark.parametrize("node, path, option", SCHEMAS, ids=lambda v: str(v))
def test_a_default_written_in_the_yaml_and_in_the_schema_is_one_value(node, path, option):
    """The composed defaults (with `option`) and the schema's field defaults agree wherever both set
    a key: a schema built in Python (a test, a tool) behaves as train.py does."""
    composed = OmegaConf.to_container(compose_cfg([option] if option else []), resolve=False)[node]
    defaults = _defaults(_schema(path))
    differ = {k: (composed[k], v) for k, v in defaults.items() if k in composed and composed[k] != v}
    assert differ == {}, f"{node}: yaml vs schema {differ}"


@pytest.mark.parametrize("group", sorted(set(GROUP_SCHEMAS) & {p.name for p in CONF.iterdir() if p.is_dir()}))
def test_every_key_an_option_sets_is_in_its_schema(group):
    names = set(_defaults(_schema(GROUP_SCHEMAS[group])))
    for option in sorted((CONF / group).glob("*.yaml")):
        keys = set(yaml.safe_load(option.read_text()) or {}) - {"defaults"}
        assert keys <= names, f"{option.name}: {sorted(keys - names)} are not keys of {GROUP_SCHEMAS[group]}"


def test_every_model_options_keys_and_defaults_are_its_configs():
    import importlib

    for option in sorted(p.stem for p in (CONF / "model").glob("*.yaml")):
        composed = OmegaConf.to_container(compose_cfg([f"model={option}"]), resolve=False)["model"]
        module, _, name = composed["_target_"].rpartition(".")
        schema = getattr(getattr(importlib.import_module(module), name), "Config", None)
        if schema is None:  # a Hugging Face model: its keys are the library's
            continue
        defaults = _defaults(schema)
        assert set(composed) - {"_target_"} <= set(defaults), option
        differ = {k: (v, defaults[k]) for k, v in composed.items()
                  if k in defaults and v != defaults[k] and not (isinstance(v, str) and "${" in v)}
        assert differ == {}, f"model={option}: yaml vs schema {differ}"
