"""A rank started by torchrun dies with its launcher.

torchrun starts each rank in a session of its own, so `kill -9 -PGID` of the launcher (what
schedulers and people do) leaves the ranks training and writing into a run directory that a
`resume=auto` may already be using. Linux's parent-death signal ends a rank the moment its
launcher's process is gone: SIGKILL, so that it writes nothing more (a checkpoint it was writing
stays a temporary file, which the next start removes).
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
TORCHRUN_MARK = "TORCHELASTIC_RUN_ID"  # set by torchrun's agent for every rank it starts


def die_with_launcher(environ: dict[str, str] | os._Environ = os.environ) -> bool:
    """Ask the kernel to SIGKILL this process when its parent (torchrun's agent) exits; exit at
    once when the launcher is already gone. False where it does not apply (not torchrun, not Linux)."""
    if TORCHRUN_MARK not in environ or not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return False
    if os.getppid() == 1:  # the launcher died before the request was made: init adopted this rank
        os._exit(1)
    return True
