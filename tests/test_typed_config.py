"""The one way config nodes are checked: a dataclass whose fields carry their checks."""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from omegaconf import OmegaConf

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
