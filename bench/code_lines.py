"""Are bugs in the user's own code named at their line? Fresh programs, each with one bug in its
model's forward or its objective and a fixed twin (bench/code_programs/, written apart from the
checks: the lines a tool should name end in `# bug`), trained as `python train.py` processes for
two steps; summary.json's `code_causes` are read back.

    python -m bench.code_lines            # every program, 2 at a time (~2 min on 2 cores)
    python -m bench.code_lines --only probabilities_sigmoid_tagger

A buggy program is *named* when a cause's lines include one of its `# bug` lines, *other* when a
cause names other lines, *missed* when none is found; a fixed twin is *clean* with no cause, and so
must be both runs of a sound program (`KIND: ..._ok`, no `# bug` line: one a check could mistake).
"""
from __future__ import annotations

import argparse
import importlib
import json
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.train_process import run_train

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ROOT / "bench" / "code_programs"
STEPS = ("trainer.max_steps=2", "trainer.eval_every=2", "batch_size=32", "logger=none", "diagnose=false")
TIMEOUT_S = 300.0


@dataclass
class Result:
    program: str
    kind: str
    buggy: str  # named, other, missed or failed (why)
    fixed: str  # clean, alarmed (checks) or failed (why)
    checks: list[str]


def kind_of(module: str) -> str:
    doc = importlib.import_module(f"bench.code_programs.{module}").__doc__ or ""
    return doc.split(":", 1)[1].split(".", 1)[0].strip().split()[0] if doc.startswith("KIND:") else "?"


def bug_lines(module: str) -> set[int]:
    text = (PROGRAMS / f"{module}.py").read_text().splitlines()
    return {i + 1 for i, line in enumerate(text) if line.rstrip().endswith("# bug")}


def causes(module: str, model: str, objective: str, run_dir: Path) -> tuple[list[dict] | None, str | None]:
    path = f"bench.code_programs.{module}"
    ran = run_train(("data=custom", f"data._target_={path}.data", f"model._target_={path}.{model}",
                     f"loss._target_={path}.{objective}", *STEPS), run_dir, TIMEOUT_S)
    if ran["error"]:
        return None, ran["error"]
    return json.loads((run_dir / "summary.json").read_text()).get("code_causes") or [], None


def score(module: str, tmp: Path) -> Result:
    marked = bug_lines(module)
    found, error = causes(module, "Model", "loss", tmp / module / "buggy")
    if found is None:
        buggy = f"failed ({error})"
    elif not marked:  # a sound program (KIND: ..._ok) that must get no cause, in both variants
        buggy = "clean" if not found else "alarmed (" + ", ".join(c["check"] for c in found) + ")"
    elif any(line["file"].endswith(f"{module}.py") and line["line"] in marked
             for cause in found for line in cause["lines"]):
        buggy = "named"
    else:
        buggy = "other" if found else "missed"
    clean, error = causes(module, "FixedModel", "fixed_loss", tmp / module / "fixed")
    fixed = f"failed ({error})" if clean is None else "clean" if not clean else \
        "alarmed (" + ", ".join(c["check"] for c in clean) + ")"
    return Result(module, kind_of(module), buggy, fixed, [c["check"] for c in found or ()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="program names (files of bench/code_programs without .py)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    modules = args.only or sorted(p.stem for p in PROGRAMS.glob("*.py") if p.stem != "__init__")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda m: score(m, Path(tmp)), modules))
    print("| program | kind | buggy | causes found | fixed twin |\n|---|---|---|---|---|")
    for r in sorted(results, key=lambda r: (r.kind, r.program)):
        print(f"| {r.program} | {r.kind} | {r.buggy} | {', '.join(r.checks) or '—'} | {r.fixed} |")
    sound = [r for r in results if r.buggy == "clean" or r.buggy.startswith("alarmed")]  # no `# bug` line
    buggy = [r for r in results if r not in sound]
    named = sum(r.buggy == "named" for r in buggy)
    clean = sum(r.fixed == "clean" for r in results) + sum(r.buggy == "clean" for r in sound)
    print(f"\nnamed at their line: {named} of {len(buggy)} ({named / len(buggy):.0%}); "
          f"sound programs clean (fixed twins, and both runs of a KIND: ..._ok program): {clean} of "
          f"{len(results) + len(sound)}")


if __name__ == "__main__":
    main()
