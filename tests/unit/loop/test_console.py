"""The console as a user sees it: a training run in a pseudo-terminal of a given width, its output
replayed on a small screen model, and the same run through a pipe (CI, files)."""
from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

RUN = ["model=mlp", "data=synthetic", "model.width=32", "trainer.max_steps=60", "trainer.log_every=10",
       "trainer.eval_every=20", "schedule.warmup=5", "logger=none", "diagnose=false"]
LOG_LINE = re.compile(r"^\d\d:\d\d:\d\d \[[A-Z]+\] ")
BAR = re.compile(r"^━+ 60/60 +\d+:\d\d:\d\d ")
CSI = re.compile(rb"\x1b\[([?\d;]*)([A-Za-z])")
# what rich would read instead of the terminal's own size and abilities
RICH_ENV = ("COLUMNS", "LINES", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES")


def run_in_terminal(args: list[str], columns: int, timeout: float = 60) -> bytes:
    """`python train.py ARGS` with a pseudo-terminal of `columns` columns as stdin/stdout/stderr."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in RICH_ENV}
    proc = subprocess.Popen([sys.executable, str(ROOT / "train.py"), *args], cwd=ROOT, stdin=slave, stdout=slave,
                            stderr=slave, env={**env, "TERM": "xterm-256color", "OMP_NUM_THREADS": "1"})
    os.close(slave)
    output, deadline = bytearray(), time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: every writer of the terminal has closed it
                    break
                if not chunk:
                    break
                output += chunk
        assert proc.wait(timeout=max(deadline - time.monotonic(), 1)) == 0, output.decode(errors="replace")[-3000:]
    finally:
        proc.kill()
        os.close(master)
    return bytes(output)


def screen(output: bytes, columns: int) -> list[str]:
    """The lines a terminal of `columns` columns shows after `output` (scrollback included):
    CR, LF, cursor up, erase line and autowrap are modelled; colours and cursor visibility ignored."""
    lines, row, col = [[]], 0, 0
    for token in re.split(rb"(\x1b\[[?\d;]*[A-Za-z]|\r|\n)", output):
        if token == b"\r":
            col = 0
        elif token == b"\n":
            row, col = row + 1, 0
        elif match := CSI.fullmatch(token):
            count, code = match.groups()
            if code == b"A":
                row = max(row - int(count or 1), 0)
            elif code == b"K" and count == b"2":
                lines[row] = []
        else:
            for char in token.decode(errors="replace"):
                if col >= columns:  # autowrap: the character goes to the next line
                    row, col = row + 1, 0
                while len(lines) <= row:
                    lines.append([])
                cells = lines[row]
                cells.extend(" " * (col + 1 - len(cells)))
                cells[col], col = char, col + 1
        while len(lines) <= row:
            lines.append([])
    return ["".join(cells).rstrip() for cells in lines]


def first(lines: list[str], text: str) -> int:
    """Index of the first line containing `text`."""
    return next(i for i, line in enumerate(lines) if text in line)


@pytest.mark.parametrize("columns", [80, 160])
def test_terminal_shows_log_lines_above_an_intact_bar(tmp_path: Path, columns: int) -> None:
    shown = screen(run_in_terminal([*RUN, f"hydra.run.dir={tmp_path}"], columns), columns)
    bars = [line for line in shown if "━" in line]
    assert len(bars) == 1, "\n".join(shown)
    bar = bars[0]
    assert BAR.match(bar) and len(bar) <= columns, bar  # step count and ETA survive
    assert re.search(r" loss \d\.\d{4}  lr \d\.\d\de-\d\d  [\d.]+k? samples/s", bar), bar  # what matters most
    assert ("…" in bar) == (columns == 80), bar  # the metrics text is what gets cut
    log_lines = [line for line in shown if LOG_LINE.match(line)]
    assert first(log_lines, "run dir: ") < first(log_lines, "val loss") < first(log_lines, "completed after")
    assert not any("[INFO]" in line for line in bars), bar  # no log text glued onto the bar


def test_pipe_gets_plain_step_lines(tmp_path: Path) -> None:
    result = run_cli([*RUN, f"hydra.run.dir={tmp_path}"], env={"OMP_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert first(lines, f"run dir: {tmp_path}") < first(lines, "step 10/60")
    assert [line.split("] ", 1)[1].split(" | ")[0] for line in lines if "| loss" in line] == \
        [f"step {n}/60" for n in range(10, 61, 10)]
    assert "━" not in result.stdout and "\x1b[" not in result.stdout


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30).stdout


@pytest.mark.skipif(not shutil.which("tmux"), reason="tmux is not installed")
def test_in_an_80_by_24_tmux_the_bar_shows_what_matters_and_ctrl_c_checkpoints_without_a_traceback(tmp_path):
    import json

    from harness.state.checkpoint import step_checkpoints

    session, run_dir = f"harness-{os.getpid()}", tmp_path / "run"
    command = " ".join([sys.executable, str(ROOT / "train.py"), "model=mlp", "data=synthetic", "model.width=32",
                        "trainer.max_steps=100000", "trainer.log_every=10", "logger=none", "diagnose=false",
                        f"hydra.run.dir={run_dir}", "; sleep 600"])
    env = {k: v for k, v in os.environ.items() if k not in RICH_ENV}
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", command], check=True,
                   env={**env, "OMP_NUM_THREADS": "1", "TERM": "xterm-256color"}, timeout=30)
    try:
        deadline = time.monotonic() + 120
        while not re.search(r"samples/s", pane := _tmux("capture-pane", "-p", "-t", session)):
            assert time.monotonic() < deadline, pane
            time.sleep(0.5)
        bar = next(line for line in pane.splitlines() if "━" in line)
        assert len(bar) <= 80 and re.search(r"\d+/100000 .* loss \d\.\d{4}  lr \S+  [\d.]+k? samples/s", bar), bar
        _tmux("send-keys", "-t", session, "C-c")
        while not (run_dir / "summary.json").is_file():
            assert time.monotonic() < deadline, _tmux("capture-pane", "-p", "-t", session)
            time.sleep(0.5)
        time.sleep(1)
        pane = _tmux("capture-pane", "-p", "-S", "-200", "-t", session)
        assert "Traceback" not in pane, pane
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["status"] == "interrupted", pane
        assert step_checkpoints(run_dir)[0].name == f"step_{summary['steps']:08d}.pt"
    finally:
        _tmux("kill-session", "-t", session)

