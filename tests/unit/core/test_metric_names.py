"""Metric names are written once, in harness/core/metric_names.py: the code that logs a metric and the
rules and plots that read it import the same constant, so a rename cannot leave a reader behind."""
from __future__ import annotations

import ast

from conftest import ROOT
import harness.core.metric_names as metric_names

NAMES = {v for k, v in vars(metric_names).items() if k.isupper() and isinstance(v, str)}
FAMILIES = tuple(v for v in NAMES if v.endswith("/"))
SOURCES = [p for d in ("harness", "hydra_plugins", "scripts") for p in (ROOT / d).rglob("*.py")] + [ROOT / "train.py"]


def literal_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal that is a metric name or starts a per-tensor family,
    f-strings included (by their leading text)."""
    found = []
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    for node in ast.walk(tree):
        if id(node) in parts:  # judged with its f-string
            continue
        if isinstance(node, ast.JoinedStr):
            head = node.values[0] if node.values else None
            if isinstance(head, ast.Constant) and isinstance(head.value, str) and head.value.startswith(FAMILIES):
                found.append((node.lineno, head.value))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if node.value in NAMES or node.value.startswith(FAMILIES):
                found.append((node.lineno, node.value))
    return found


def test_the_scan_finds_names_written_as_literals():
    tree = ast.parse('row["train/loss"]\nmetrics[f"grad_norm/{name}"] = 1\nprint("the train/loss curve")')
    assert [text for _, text in literal_names(tree)] == ["train/loss", "grad_norm/"]


def test_metric_names_appear_as_literals_only_in_their_module():
    found = {f"{path.relative_to(ROOT)}:{line}: {text}" for path in SOURCES if path.name != "metric_names.py"
             for line, text in literal_names(ast.parse(path.read_text()))}
    assert found == set()
