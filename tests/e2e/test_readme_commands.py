"""README's and docs/'s commands run as written, and their links lead somewhere.

- README's quick start (with debug=smoke) and the obvious short run;
- the commands at the top of docs/sweeps.md (with debug=smoke, a few trials and a sweep dir of
  the test's own appended); README's sweep commands must be among them;
- every bash block marked `<!-- test: run -->` (each line as written) or `<!-- test: smoke -->`
  (`debug=smoke` appended to each `python train.py` line) in README.md and docs/*.md, run line by
  line in a fresh directory; some lines' comments are claims that are checked (CLAIMS);
- every `python train.py` line in any bash block composes with Hydra (in-process, no training);
- every relative link in README.md and docs/*.md points at an existing file, and every #anchor
  into a Markdown file at one of its headings (GitHub's slugs).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONF, ROOT, run_cli
import warm_train

README = (ROOT / "README.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NEEDS_ELSEWHERE = ("storage=postgresql", "hydra/launcher=torchrun")  # a database server / GPUs: tests of their own


def section(title: str, text: str = README, level: int = 2) -> str:
    hashes = "#" * level
    return re.search(rf"^{hashes} {re.escape(title)}\n(.*?)^## ", text, re.S | re.M).group(1)


def commands(text: str) -> list[list[str]]:
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" && ")[-1].split("  #")[0].strip()
            if line.startswith("python train.py") and not any(n in line for n in NEEDS_ELSEWHERE):
                found.append(shlex.split(line)[2:])
    return found


QUICK = commands(section("Quick start"))
SWEEPS = commands(section("Sweeps", (ROOT / "docs" / "sweeps.md").read_text(), level=1))
README_SWEEPS = [args for args in commands(README) if "-m" in args]


def test_readme_lists_the_commands():
    assert QUICK == [[]] and len(SWEEPS) >= 3
    # README's sweeps are the ones docs/sweeps.md shows, so test_sweep_commands runs them
    assert README_SWEEPS and all(args in SWEEPS for args in README_SWEEPS), README_SWEEPS


# debug=smoke shrinks the quick start; the 100-step run keeps its length (the default warmup must fit it)
# on a smaller batch, with one eval and one checkpoint. Both start a fresh interpreter, start-up and all.
@pytest.mark.parametrize("args,extra", [(*QUICK, ["debug=smoke"]), (["trainer.max_steps=100"], ["batch_size=8", "logger=none"])],
                         ids=["quick start", "max_steps=100"])
def test_quick_start_and_a_short_run(tmp_path, args, extra):
    result = run_cli([*args, *extra, "diagnose=false", f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, cold=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["status"] == "completed"


# The first command runs by default; the presets' sweeps (6 grid trials, the baby GPT) cost ~50 s: -m slow.
SWEEP_CASES = [pytest.param(a, marks=[pytest.mark.slow] if i else []) for i, a in enumerate(SWEEPS)]


@pytest.mark.parametrize("args", SWEEP_CASES, ids=[" ".join(a)[:60] for a in SWEEPS])
def test_sweep_commands(tmp_path, args):
    sweep_dir = tmp_path / "sweep"
    result = run_cli([*args, "debug=smoke", "diagnose=false", "logger=none", "hydra.sweeper.n_trials=2",
                      "hydra.sweeper.n_jobs=2", "hydra.sweeper.plots=false", "hydra.sweeper.tensorboard=false",
                      f"hydra.sweep.dir={sweep_dir}"], cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["best_trial"] is not None


# ---------------------------------------------------------------- bash blocks of README.md and docs/*.md

def bash_blocks(page: Path) -> list[tuple[int, str | None, str]]:
    """(line number, marker or None, body) of every ```bash block of a page."""
    text = page.read_text()
    found = []
    for m in re.finditer(r"^```bash\n(.*?)^```", text, re.S | re.M):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = re.fullmatch(r"<!-- test: (\w+) -->", before.strip())
        found.append((text.count("\n", 0, m.start()) + 1, marker and marker.group(1), m.group(1)))
    return found


def lines_of(block: str) -> list[tuple[list[str], str]]:
    """Each command of a block as (argv, its comment); continuation lines joined, `a && b` split."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        code, _, comment = line.partition("  #")
        if code.strip() and not code.lstrip().startswith("#"):
            out.extend((shlex.split(part), comment.strip()) for part in code.split(" && "))
    return out


MARKED = [(page, line, marker, body) for page in PAGES for line, marker, body in bash_blocks(page) if marker]


def run_dir_of(result: subprocess.CompletedProcess, cwd: Path) -> Path:
    found = re.search(r"run dir: (\S+)", result.stderr + result.stdout)
    assert found, "no `run dir:` line"
    return cwd / found.group(1)


def report(run_dir: Path) -> str:
    return (run_dir / "report.md").read_text()


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


# A comment a marked line ends with, and what it claims about the run the line starts.
CLAIMS = {
    "3 skipped steps": lambda d: summary(d)["skipped_steps"] == 3,
    "a rollback": lambda d: any(e.get("kind") == "rollback" for e in summary(d)["events"]),
    "the report names diverging": lambda d: "`diverging`" in report(d),
    "the undo column: no finding of it": lambda d: "`diverging`" not in report(d),
}


def test_marked_blocks_exist():
    pages = {page.name for page, *_ in MARKED}
    assert {"README.md", "stability.md", "diagnosis.md"} <= pages and len(MARKED) >= 5, pages
    assert {m for _, _, m, _ in MARKED} <= {"run", "smoke"}, "unknown marker: <!-- test: run --> or <!-- test: smoke -->"
    comments = {c for *_, body in MARKED for _, c in lines_of(body)}
    assert set(CLAIMS) <= comments, set(CLAIMS) - comments  # every claim is still made somewhere


@pytest.mark.trajectory
@pytest.mark.parametrize("page,line,marker,body", MARKED,
                         ids=[f"{p.relative_to(ROOT)}:{n}" for p, n, *_ in MARKED])
def test_marked_block_runs(tmp_path, page, line, marker, body):
    for argv, comment in lines_of(body):
        benchmark = argv[1] == "-m" and argv[2].startswith("bench.")  # run from the repository root, as docs say
        assert argv[0] == "python" and (argv[1] == "train.py" or argv[1].startswith("scripts/") or benchmark), argv
        args = argv[1:] if benchmark else [str(ROOT / argv[1]), *argv[2:]]
        if marker == "smoke" and argv[1] == "train.py":
            args.append("debug=smoke")
        env = {**os.environ, "PYTHONPATH": str(ROOT)} if benchmark else None
        result = warm_train.run([sys.executable, *args], cwd=tmp_path, env=env, timeout=300)
        assert result.returncode == 0, f"{' '.join(argv)}\n{result.stderr[-3000:]}"
        if comment in CLAIMS:
            assert CLAIMS[comment](run_dir_of(result, tmp_path)), f"{' '.join(argv)}: not {comment!r}"


# ---------------------------------------------------------------- every train.py line composes

FLAGS_WITH_VALUE = {"--cfg", "-p", "--package", "-cn", "--config-name", "-cp", "--config-path", "-cd",
                    "--config-dir", "--info", "-sc", "--shell-completion"}
PLACEHOLDERS = ("<", "...", "…", "$")


def train_lines() -> list[tuple[str, list[str]]]:
    found = []
    for page in PAGES:
        for line, _, body in bash_blocks(page):
            for argv, _ in lines_of(body):
                if "train.py" in argv and not any(p in " ".join(argv[argv.index("train.py"):]) for p in PLACEHOLDERS):
                    found.append((f"{page.relative_to(ROOT)}:{line} {' '.join(argv)}"[:120], argv))
    return found


def overrides_of(argv: list[str]) -> list[str]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args, out, skip = argv[argv.index("train.py") + 1:], [], False
    for arg in args:
        if skip or arg.startswith("-"):
            skip = not skip and arg in FLAGS_WITH_VALUE
            continue
        out.append(arg)
    parsed = OverridesParser.create().parse_overrides(out)
    return [arg for arg, o in zip(out, parsed) if not o.is_sweep_override()]  # a sweep composes per trial


TRAIN_LINES = train_lines()


def test_the_docs_show_train_lines():
    assert len(TRAIN_LINES) >= 30


@pytest.mark.parametrize("argv", [a for _, a in TRAIN_LINES], ids=[i for i, _ in TRAIN_LINES])
def test_train_line_composes(argv):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        compose(config_name="train", overrides=overrides_of(argv), return_hydra_config=True)


# ---------------------------------------------------------------- links

def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links reduced to their text, lower case, punctuation dropped."""
    heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def without_code(text: str) -> str:
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    return re.sub(r"`[^`]*`", "", text)


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.*)$", re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M), re.M):
        base = slug(heading)
        n = seen.get(base, 0)
        seen[base] = n + 1
        yield base if n == 0 else f"{base}-{n}"


def links(page: Path) -> list[str]:
    return re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", without_code(page.read_text()))


def test_pages_have_links():
    assert len(links(ROOT / "README.md")) >= 10 and links(ROOT / "docs" / "README.md")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in set(anchors(file)):
            broken.append(f"{target}: no heading with anchor #{anchor} in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}:\n" + "\n".join(broken)
