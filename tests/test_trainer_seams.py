"""The trainer is built once and used through its methods: no mode, script or test swaps its parts
by assigning to its attributes (what the doctor and the LR finder need, they pass as arguments).
`trainer.state`, the counters a run records, is the one record callbacks write."""
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
