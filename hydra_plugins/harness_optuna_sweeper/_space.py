"""Hydra's sweep syntax mapped exactly onto Optuna distributions, and sampled values back.

    choice(a,b), a,b, glob(*)  -> CategoricalDistribution
    range(a,b[,s])             -> exactly the values Hydra's range yields (end EXCLUSIVE:
                                  range(1,4) is 1,2,3): IntDistribution, or a stepped
                                  FloatDistribution for float ranges
    interval(a,b)              -> FloatDistribution(a, b)
    int(interval(a,b))         -> IntDistribution(a, b)
    tag(log, ...)              -> log=True (interval, or range with step 1)

Any override that is not a sweep is "fixed": forwarded unchanged to every trial. This is the
part the published plugin got wrong, so it is kept pure and testable without running anything.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from hydra.core.override_parser.types import (
    ChoiceSweep,
    IntervalSweep,
    Override,
    QuotedString,
    RangeSweep,
    Transformer,
)
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
    distribution_to_json,
)

from harness.core.errors import ConfigError

ALLOWED_TAGS = frozenset({"log"})


@dataclass(frozen=True)
class Param:
    """One searched key: its distribution and how a sampled value is written as an override."""

    name: str  # Optuna parameter name: the key without +/++ (e.g. "optim.lr", "optim")
    key: str  # the override key as written, prefix and @package included
    source: str  # the override text it came from, for error messages
    distribution: BaseDistribution
    values: Optional[tuple[Any, ...]]  # every value of a choice/range (the grid); None: interval
    texts: tuple[str, ...] = ()  # categorical choice i -> its text in an override

    def text(self, value: Any) -> str:
        dist = self.distribution
        if isinstance(dist, CategoricalDistribution):
            return self.texts[int(dist.to_internal_repr(value))]
        if isinstance(dist, IntDistribution):
            return str(int(value))
        if self.values is not None:
            # A float range's values are exact decimals; Optuna's stepping adds float noise
            # (0.30000000000000004), so snap back to the value Hydra's range would give.
            value = min(self.values, key=lambda v: abs(v - value))
        return repr(float(value))

    def override(self, value: Any) -> str:
        return f"{self.key}={self.text(value)}"


@dataclass(frozen=True)
class SearchSpace:
    params: tuple[Param, ...]
    fixed: tuple[str, ...]  # non-sweep overrides, in the order given

    def distributions(self) -> dict[str, BaseDistribution]:
        return {p.name: p.distribution for p in self.params}

    def sampled_overrides(self, values: Mapping[str, Any]) -> list[str]:
        return [p.override(values[p.name]) for p in self.params]

    def overrides(self, values: Mapping[str, Any]) -> list[str]:
        """Everything a trial's app gets on its command line (before hydra.run.dir)."""
        return [*self.fixed, *self.sampled_overrides(values)]

    def grid(self) -> list[dict[str, Any]]:
        """Every combination, in a stable order; only choice/range parameters have one."""
        axes = []
        for p in self.params:
            if p.values is None:
                raise ConfigError(
                    p.key,
                    p.source.split("=", 1)[1],
                    "the grid sampler needs choice(...), a,b or range(...); "
                    "an interval has no finite set of values",
                )
            axes.append(p.values)
        names = [p.name for p in self.params]
        return [dict(zip(names, row, strict=True)) for row in itertools.product(*axes)]

    def first(self) -> dict[str, Any]:
        """A representative assignment (first choice, lower bound) to validate composition."""
        return {
            p.name: p.values[0] if p.values is not None else p.distribution.low  # type: ignore
            for p in self.params
        }

    def fingerprint(self, *extra: str) -> str:
        """Stable hash of the space, the fixed overrides and `extra`: the same command gives
        the same hash, so a rerun finds its study again."""
        canon = {
            "params": {p.key: json.loads(distribution_to_json(p.distribution)) for p in self.params},
            "texts": {p.key: list(p.texts) for p in self.params if p.texts},
            "fixed": list(self.fixed),
            "extra": list(extra),
        }
        blob = json.dumps(canon, sort_keys=True).encode()
        return hashlib.sha1(blob).hexdigest()[:10]

    def describe(self) -> dict[str, str]:
        return {p.name: p.source.split("=", 1)[1] for p in self.params}


def parse_search_space(overrides: Sequence[Override]) -> SearchSpace:
    """Later overrides of the same key win (the command line after `hydra.sweeper.params`)."""
    latest: dict[str, Override] = {}
    for ov in overrides:
        name = _name(ov)
        latest.pop(name, None)
        latest[name] = ov
    params: list[Param] = []
    fixed: list[str] = []
    for name, ov in latest.items():
        if ov.is_sweep_override():
            params.append(_param(name, ov))
        else:
            fixed.append(_source(ov))
    if not params:
        raise ConfigError(
            "hydra.sweeper.params",
            {},
            "nothing to search; give e.g. 'optim.lr=tag(log,interval(1e-4,1e-2))' or "
            "'clip=choice(0.5,1.0)' on the command line or in hydra.sweeper.params",
        )
    return SearchSpace(params=tuple(params), fixed=tuple(fixed))


def _name(ov: Override) -> str:
    return ov.key_or_group if ov.package is None else f"{ov.key_or_group}@{ov.package}"


def _source(ov: Override) -> str:
    return ov.input_line or f"{ov.get_key_element()}={ov.get_value_element_as_str()}"


def _param(name: str, ov: Override) -> Param:
    sweep = ov.value()
    source = _source(ov)
    value_text = source.split("=", 1)[1]
    tags = set(getattr(sweep, "tags", set()))
    if tags - ALLOWED_TAGS:
        raise ConfigError(
            ov.get_key_element(), value_text, f"unknown tag(s) {sorted(tags - ALLOWED_TAGS)}; "
            f"allowed: {sorted(ALLOWED_TAGS)}"
        )
    log = "log" in tags

    def bad(allowed: str) -> ConfigError:
        return ConfigError(ov.get_key_element(), value_text, allowed)

    key = ov.get_key_element()
    if isinstance(sweep, IntervalSweep):
        assert sweep.start is not None and sweep.end is not None
        if not sweep.start < sweep.end:
            raise bad("interval(low, high) needs low < high")
        if log and sweep.start <= 0:
            raise bad("tag(log, ...) needs a positive lower bound")
        dist: BaseDistribution
        if isinstance(sweep.start, int) and isinstance(sweep.end, int):
            dist = IntDistribution(sweep.start, sweep.end, log=log)
        else:
            dist = FloatDistribution(float(sweep.start), float(sweep.end), log=log)
        return Param(name, key, source, dist, values=None)

    if isinstance(sweep, RangeSweep):
        if not sweep.step:
            raise bad("range(start, stop, step) needs a step other than 0")
        values = tuple(sweep.range())
        if not values:
            raise bad("the range is empty (Hydra's range excludes its end: range(1,4) is 1,2,3)")
        step = abs(sweep.step)
        if log and (step != 1 or min(values) <= 0):
            raise bad("tag(log, range(...)) needs step 1 and a positive start")
        if all(isinstance(v, int) for v in values):
            dist = IntDistribution(min(values), max(values), step=int(step), log=log)
        else:
            if log:
                raise bad("tag(log, ...) on a float range; use tag(log, interval(a, b))")
            dist = FloatDistribution(float(min(values)), float(max(values)), step=float(step))
        return Param(name, key, source, dist, values=values)

    # choice(...), a,b and glob(...)
    if log:
        raise bad("tag(log, ...) applies to interval(...) and range(...), not to choices")
    elements = list(sweep.list) if isinstance(sweep, ChoiceSweep) else list(ov.sweep_iterator())
    choices = tuple(_choice_value(e) for e in elements)
    if len(set(map(repr, choices))) != len(choices):
        raise bad("a choice is listed twice")
    texts = tuple(Transformer.str(e) for e in elements)
    return Param(name, key, source, CategoricalDistribution(choices), values=choices, texts=texts)


def _choice_value(element: Any) -> Any:
    """Optuna stores only None/bool/int/float/str; lists and dicts are kept as their text."""
    if isinstance(element, QuotedString):
        return element.text
    if element is None or isinstance(element, (bool, int, float, str)):
        return element
    return Transformer.str(element)
