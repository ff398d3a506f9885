"""Imports flow one way: no module of the harness or its plugins imports, directly or through
others, a module that imports it back. Every import statement counts, including those inside
functions and under TYPE_CHECKING: a lazy import hides a circle, it does not remove it."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

PACKAGES = ("harness", "hydra_plugins")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imported(node: ast.AST, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: climb from the importing module's package
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        return [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return []


def import_graph() -> dict[str, set[str]]:
    """module -> the modules of PACKAGES it imports (a name resolves to its longest known module)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = (resolve(t) for node in ast.walk(ast.parse(path.read_text())) for t in _imported(node, package))
        graph[name] = {t for t in targets if t and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def test_the_scan_sees_a_circle_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_its_importers():
    graph = import_graph()
    assert "hydra_plugins.harness_optuna_sweeper._sweep" in graph and graph["harness.loop.trainer"]
    assert circles(graph) == []


def imported_in_a_fresh_interpreter(code: str, packages: tuple[str, ...]) -> list[str]:
    """Which of `packages` a new Python process has imported after running `code` from the root."""
    probe = f"{code}\nimport sys\nprint(sorted(p for p in {packages!r} if p in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def test_hydra_plugin_scan_imports_neither_torch_nor_optuna():
    """Hydra imports every module under hydra_plugins/ when any Hydra app starts (a sweep's fake
    app, a trial, train.py's --help): a top-level torch import there costs each of them ~1.5 s."""
    code = "from hydra.core.plugins import Plugins\nPlugins.instance()"
    assert imported_in_a_fresh_interpreter(code, ("torch", "optuna")) == []


def test_reading_a_run_never_loads_torch():
    """The report, its plots (a background process per run, one per sweep trial) and
    scripts/diagnose.py read files: importing torch would double what they take to start."""
    code = """
import runpy, sys
import harness.diagnosis, harness.diagnosis.draw, harness.diagnosis.plots
sys.argv = ["diagnose.py", "--help"]
try:
    runpy.run_path("scripts/diagnose.py", run_name="__main__")
except SystemExit:
    pass
"""
    assert imported_in_a_fresh_interpreter(code, ("torch",)) == []


def test_the_harness_and_train_py_import_no_plugin_and_no_launcher_imports_the_sweeper():
    """The plugins are thin adapters over harness.launch: the harness and train.py name no plugin
    (a single run's launcher is found from the config's `_target_`), and neither launcher borrows
    the Optuna sweeper's modules."""
    graph = import_graph()
    assert not [(m, t) for m, targets in graph.items() if m.startswith("harness") for t in targets
                if t.startswith("hydra_plugins")]
    entry = {t for node in ast.walk(ast.parse((ROOT / "train.py").read_text())) for t in _imported(node, "")}
    assert entry and not [t for t in entry if t.startswith("hydra_plugins")]
    launchers = [(m, t) for m, targets in graph.items() for t in targets
                 if m.startswith(("hydra_plugins.harness_torchrun_launcher", "hydra_plugins.harness_slurm_launcher"))
                 and t.startswith("hydra_plugins.harness_optuna_sweeper")]
    assert not launchers


# harness/'s folders, from the entry down: a module may import its own layer and the layers below it,
# never one above (docs/architecture.md, "Layers").
LAYERS = (("entry", "launch"), ("modes", "remedy"), ("config", "assembly"), ("loop",), ("diagnosis",), ("training",),
          ("models", "data"), ("logger",), ("state",), ("core",))


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "harness" or len(parts) < 2:
        return None
    return next((i for i, folders in enumerate(LAYERS) if parts[1] in folders), None)


def test_every_folder_of_the_harness_has_a_layer_and_imports_flow_down():
    folders = {p.name for p in (ROOT / "harness").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == {f for layer in LAYERS for f in layer}
    assert len(list((ROOT / "harness").iterdir())) - ((ROOT / "harness" / "__pycache__").exists()) <= 15
    upward = [f"{module} -> {target}" for module, targets in import_graph().items() for target in targets
              if _layer(module) is not None and _layer(target) is not None and _layer(target) < _layer(module)]
    assert upward == []


def test_the_layer_check_sees_an_upward_import():
    assert _layer("harness.core.errors") > _layer("harness.loop.trainer") > _layer("harness.entry.cli")
    assert _layer("harness.models.gpt") == _layer("harness.data.base")
