"""`python train.py ARGS` as a process of its own, without paying its start-up each time.

A CLI test's process spends about two seconds importing torch, its compiler stack (the first
optimizer imports torch._dynamo) and Hydra before it reads its first argument; with some two
hundred such processes that is most of the test run. A server per test worker imports them once
and, for each command, forks: the child is a new process (own pid, cwd, environment, stdin,
stdout, stderr, exit status, signals) that runs train.py as `__main__` and ends as the
interpreter ends it, less the teardown of the shared modules. The server runs no test code, so a child
inherits nothing but the imports. Commands the fork cannot stand for (another program, or an
environment that changes what Python reads at start-up) go to a fresh interpreter instead.

Run as a script, this file is the server: one JSON request per line on stdin, its replies on the
pipe whose descriptor is its argument. HARNESS_TESTS_COLD=1 (or `cold=True`) starts every command
in a fresh interpreter instead, as the quick-start test always does.
"""
from __future__ import annotations

import atexit
import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parent.parent
TRAIN = str(ROOT / "train.py")
# What a fork cannot change once Python has started: these fall back to a fresh interpreter.
STARTUP_ENV = ("PYTHONHOME", "PYTHONSAFEPATH", "PYTHONNOUSERSITE", "PYTHONOPTIMIZE", "PYTHONDONTWRITEBYTECODE",
               "PYTHONWARNINGS", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDEVMODE",
               "PYTHONFAULTHANDLER", "PYTHONMALLOC", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
               "LD_PRELOAD", "LD_LIBRARY_PATH")
COLD = "HARNESS_TESTS_COLD"
PRELOAD = ("torch", "torch._dynamo", "torch.utils.tensorboard", "numpy", "hydra", "omegaconf", "yaml",
           "harness.entry.cli", "harness.modes.run")


class _Server:
    """This worker's server process, started on first use."""

    def __init__(self) -> None:
        replies_r, replies_w = os.pipe()
        self.proc = subprocess.Popen([sys.executable, __file__, str(replies_w)], stdin=subprocess.PIPE,
                                     stdout=subprocess.DEVNULL, pass_fds=(replies_w,), text=True)
        os.close(replies_w)
        self.replies = replies_r
        self.startup = {k: os.environ.get(k) for k in STARTUP_ENV}
        atexit.register(self.close)

    def _reply(self, timeout: float | None = None) -> dict | None:
        """The server's next reply line; None when none came within `timeout` s."""
        line = b""
        while not line.endswith(b"\n"):
            if not select.select([self.replies], [], [], timeout)[0]:
                return None
            byte = os.read(self.replies, 1)
            if not byte:
                raise RuntimeError(f"the train.py fork server exited ({self.proc.poll()})")
            line += byte
        return json.loads(line)

    def ask(self, request: dict, timeout: float) -> int:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        pid = self._reply()["pid"]
        done = self._reply(timeout)
        if done is None:
            os.kill(pid, signal.SIGKILL)
            self._reply()
            raise subprocess.TimeoutExpired(request["argv"], timeout)
        return done["returncode"]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


_server: _Server | None = None
_ended: dict[str, float] = {}  # cwd -> when the last command forked there ended


def _next_second(cwd: str) -> None:
    """A fresh interpreter reads Hydra's clock seconds after it starts, so two commands run one
    after the other in a directory never share a default run dir (outputs/DATE/HH-MM-SS); a fork
    reads it at once, so it starts no sooner than the second after the last one ended."""
    last = _ended.get(cwd)
    if last is not None and int(time.time()) == int(last):
        time.sleep(1 - time.time() % 1)


def run(argv: list[str], cwd: Path | str, env: dict[str, str] | None = None, timeout: float = 300,
        cold: bool = False) -> subprocess.CompletedProcess:
    """subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout), forked
    from the server when argv is `python train.py ...` and env leaves what Python read at start-up."""
    global _server
    environ = dict(env if env is not None else os.environ)
    if argv[:2] == [sys.executable, TRAIN] and not cold and not os.environ.get(COLD):
        _server = _server or _Server()
        if _server.startup == {k: environ.get(k) for k in STARTUP_ENV}:
            _next_second(str(cwd))
            with tempfile.TemporaryDirectory() as tmp:
                out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
                request = {"argv": argv[1:], "cwd": str(cwd), "env": environ, "stdout": str(out), "stderr": str(err)}
                returncode = _server.ask(request, timeout)
                _ended[str(cwd)] = time.time()
                return subprocess.CompletedProcess(argv, returncode, out.read_text(), err.read_text())
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _pythonpath(environ: Mapping[str, str]) -> list[str]:
    return [os.path.abspath(p) for p in environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _become(request: dict, base_path: list[str]) -> None:
    """In the child: take the request's cwd, environment and streams, as exec would have given them."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY | os.O_CREAT),
                            (2, request["stderr"], os.O_WRONLY | os.O_CREAT)):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    sys.path[:] = [str(ROOT), *_pythonpath(os.environ), *base_path]
    sys.argv = list(request["argv"])


def _run_as_main(path: str) -> int:
    """Run `path` as `__main__`; its exit status as the interpreter gives it (an uncaught
    exception's traceback on stderr and 1; Ctrl-C's: -SIGINT)."""
    try:
        runpy.run_path(path, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        traceback.print_exc()
        return -signal.SIGINT
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports it
        traceback.print_exc()
        return 1
    return 0


def _exit(status: int) -> NoReturn:
    """End as the interpreter ends a process, as far as anyone can see (its other threads joined,
    its atexit handlers run, its streams flushed), without tearing down the modules it shares with
    the server: that teardown takes most of a second and shows nothing."""
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    if status == -signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(status & 0xFF)


def serve(replies_fd: int) -> None:
    sys.path[0] = str(ROOT)  # as `python ROOT/train.py` starts
    base_path = [p for p in sys.path[1:] if p not in _pythonpath(os.environ)]  # what PYTHONPATH did not add
    for name in PRELOAD:
        __import__(name)
    replies = os.fdopen(replies_fd, "w")
    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child never comes back to this loop
            replies.close()
            _become(request, base_path)
            _exit(_run_as_main(sys.argv[0]))
        replies.write(json.dumps({"pid": pid}) + "\n")
        replies.flush()
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve(int(sys.argv[1]))
