"""Stop signals: SIGTERM, SIGUSR1 or SIGUSR2 (preemption, a scheduler's warning) and Ctrl-C end a
run at the next step boundary with a checkpoint; a second Ctrl-C ends it at once."""
from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any


class StopRequest:
    """Set by SIGTERM, SIGUSR1 or SIGUSR2 (preemption, or a scheduler's warning before the time
    limit; submitit asks SLURM for SIGUSR2), or by Ctrl-C (SIGINT): save at the next step boundary
    and exit cleanly. A second Ctrl-C stops at once, without that checkpoint."""

    def __init__(self) -> None:
        self.signal_name: str | None = None

    def install(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
                signal.signal(sig, self._handle)
            signal.signal(signal.SIGINT, self._ctrl_c)

    def _handle(self, signum: int, _frame: Any) -> None:
        self.signal_name = signal.Signals(signum).name

    def _ctrl_c(self, _signum: int, _frame: Any) -> None:
        global _interrupted
        _interrupted = True
        self.signal_name = "SIGINT"
        sys.stderr.write("\nCtrl-C: stopping after this step with a checkpoint (Ctrl-C again: stop now, "
                         "without it)\n")
        signal.signal(signal.SIGINT, _stop_now)

    @property
    def interrupted(self) -> bool:
        return self.signal_name == "SIGINT"


_interrupted = False  # Ctrl-C was pressed in this process


def interrupted_by_user() -> bool:
    """Whether Ctrl-C stopped this process's run (its exit status is then 130, as a shell expects)."""
    return _interrupted


def _stop_now(_signum: int, _frame: Any) -> None:
    sys.stderr.write("Ctrl-C again: stopped now; resume=auto continues from the last checkpoint\n")
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


EXIT_INTERRUPTED = 130  # 128 + SIGINT
