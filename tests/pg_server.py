"""A throwaway PostgreSQL server on loopback for the multi-worker sweep test.

Uses Debian's `postgresql` binaries (`.ci/run` installs them); as root the server runs as the
`postgres` user, since PostgreSQL refuses to run as root.
"""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _run(cmd: list[str]) -> None:
    result = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=120)
    if result.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {result.stderr.strip() or result.stdout.strip()}")


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a server in a fresh directory; yields a SQLAlchemy URL; stops and removes it afterwards.

    The directory sits directly in the system temp dir: the server user must be able to reach it,
    and pytest's per-user temp tree is closed to other users.
    """
    bindir = postgres_bin()
    data = Path(tempfile.mkdtemp(prefix="harness-pg-"))
    if os.geteuid() == 0:
        shutil.chown(data, "postgres")
    port = _free_port()
    _run([str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"])
    opts = f"-p {port} -k {data} -c listen_addresses=127.0.0.1"
    _run([str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-l", str(data / "server.log"), "-w", "start"])
    try:
        _run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "sweeps"])
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/sweeps"
    finally:
        _run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
        shutil.rmtree(data, ignore_errors=True)
