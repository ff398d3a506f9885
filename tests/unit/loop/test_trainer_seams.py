"""The trainer is built once and used through its methods: no mode, script or test swaps its parts
by assigning to its attributes (what the doctor and the LR finder need, they pass as arguments).
`trainer.state`, the counters a run records, is the one record callbacks write; other modules read
only a narrow set of the Trainer's attributes. The seams are
declared: the callback base names every hook the loop calls, and every sink subclasses `Sink`."""
from __future__ import annotations

import ast

from conftest import ROOT

SOURCES = [p for d in ("harness", "hydra_plugins", "scripts", "tests") for p in (ROOT / d).rglob("*.py")]


def _chain(node: ast.AST) -> list[str]:
    """`trainer.built.train_set` -> ["trainer", "built", "train_set"]; [] when the root is not a name."""
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return [node.id, *reversed(names)] if isinstance(node, ast.Name) else []


def attribute_writes(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in (t for tgt in targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])):
            chain = _chain(target)
            if len(chain) > 1 and "trainer" in chain[0] and chain[1] != "state":
                found.append((node.lineno, ".".join(chain)))
    return found


def test_the_scan_finds_attribute_writes():
    tree = ast.parse("trainer.batches = b\ntrainer.built.x, y = 1, 2\ntrainer.state.step += 1\nself.trainer = t")
    assert [text for _, text in attribute_writes(tree)] == ["trainer.batches", "trainer.built.x"]


def test_nothing_sets_attributes_on_a_built_trainer():
    found = {f"{path.relative_to(ROOT)}:{line}: {text}" for path in SOURCES
             for line, text in attribute_writes(ast.parse(path.read_text()))}
    assert found == set()


# What other modules may read of a Trainer: what callbacks need (the state they write, where metrics
# go, the pending device values, the batches' position, the run dir, where it runs, the model a
# user's callback inspects). The datasets, optimizer, step and config come from the builder's Assembly.
TRAINER_READ_FROM_OUTSIDE = {"state", "tracker", "window", "batches", "run_dir", "dist", "device", "raw_model"}


def _trainer_attributes() -> set[str]:
    """The data attributes a Trainer sets on itself (`self.x = ...` in its __init__)."""
    tree = ast.parse((ROOT / "harness" / "loop" / "trainer.py").read_text())
    init = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == "__init__"
                and any(isinstance(a, ast.Assign) for a in node.body))
    return {chain[1] for node in ast.walk(init) if isinstance(node, ast.Assign)
            for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])
            if len(chain := _chain(t)) == 2 and chain[0] == "self"}


def trainer_reads(tree: ast.AST, attributes: set[str]) -> set[str]:
    """`x.trainer.NAME` / `trainer.NAME` reads of the given attributes."""
    found = set()
    for node in ast.walk(tree):
        chain = _chain(node) if isinstance(node, ast.Attribute) else []
        for before, name in zip(chain, chain[1:]):
            if before == "trainer" and name in attributes:
                found.add(name)
    return found


def test_other_modules_read_only_the_trainers_narrow_surface():
    attributes = _trainer_attributes()
    assert {"state", "train_step", "parts", "checkpoints", "callbacks", "config"} <= attributes  # the scan sees __init__
    assert trainer_reads(ast.parse("built.trainer.parts['m']\ntrainer.state.step\nx.trainers.parts"),
                         attributes) == {"parts", "state"}
    outside = [path for path in SOURCES if path != ROOT / "harness" / "loop" / "trainer.py"]
    read = set().union(*(trainer_reads(ast.parse(path.read_text()), attributes) for path in outside))
    assert read <= TRAINER_READ_FROM_OUTSIDE, read - TRAINER_READ_FROM_OUTSIDE
    assert len(TRAINER_READ_FROM_OUTSIDE) <= 8 and TRAINER_READ_FROM_OUTSIDE <= attributes


def _called_hooks(tree: ast.AST) -> set[str]:
    """The hook names in `....callbacks.call("NAME", ...)` and `....callbacks.collect("NAME", ...)`."""
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("call", "collect") and _chain(node.func.value)[-1:] == ["callbacks"]
            and node.args and isinstance(node.args[0], ast.Constant)}


def test_the_callback_base_declares_every_hook_the_loop_calls():
    """A user's callback subclasses Callback and overrides hooks by name: a hook the loop calls
    that the base does not declare is one nobody can find."""
    from harness.loop.callbacks.base import HOOKS, Callback

    assert _called_hooks(ast.parse('self.callbacks.call("on_x", self)\nc.collect("no")')) == {"on_x"}
    called = set().union(*(_called_hooks(ast.parse(path.read_text())) for path in (ROOT / "harness").rglob("*.py")))
    assert called == set(HOOKS)
    assert all(callable(getattr(Callback, hook)) for hook in HOOKS)


def test_every_sink_implements_the_sink_base_and_the_tracker_makes_only_its_calls():
    from harness.logger import SINKS
    from harness.logger.base import Sink
    from harness.logger.console import ConsoleSink
    from harness.logger.jsonl import JsonlSink
    from harness.logger.memory import MetricHistory

    classes = [ConsoleSink, JsonlSink, MetricHistory, *(sink for sink, _ in SINKS.values())]
    assert all(issubclass(cls, Sink) and cls.log is not Sink.log for cls in classes)
    declared = {name for name, value in vars(Sink).items() if callable(value) and not name.startswith("_")}
    calls = {node.func.attr for node in ast.walk(ast.parse((ROOT / "harness" / "logger" / "tracking.py").read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and _chain(node.func.value) == ["sink"]}
    assert calls == declared == {"log", "histograms", "text", "finish", "close"}
    assert "getattr" not in (ROOT / "harness" / "logger" / "tracking.py").read_text()


def _lr_writes(tree: ast.AST) -> list[str]:
    """`...["lr"] = x`, `....base_lrs = x` and `scheduler.step()`: the ways to change a live LR."""
    found = []
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) and target.slice.value == "lr":
                found.append(f"{node.lineno}: [\"lr\"] =")
            if isinstance(target, ast.Attribute) and target.attr == "base_lrs":
                found.append(f"{node.lineno}: .base_lrs =")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "step"
                and _chain(node.func.value)[-1:] == ["scheduler"]):
            found.append(f"{node.lineno}: scheduler.step()")
    return found


def test_one_owner_writes_the_live_lr():
    """The schedule, the rollbacks' factor and the LR finder's fixed LR all go through LiveLR."""
    assert len(_lr_writes(ast.parse('g["lr"] = 1\ns.base_lrs = []\nself.scheduler.step()\ng["lr"] += 1'))) == 4
    owner = ROOT / "harness" / "training" / "schedule.py"
    found = {f"{path.relative_to(ROOT)}:{write}" for path in (ROOT / "harness").rglob("*.py") if path != owner
             for write in _lr_writes(ast.parse(path.read_text()))}
    assert found == set()
    assert _lr_writes(ast.parse(owner.read_text()))  # the scan does see the owner's writes
