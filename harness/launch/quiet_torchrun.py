"""torchrun that lets the ranks speak for themselves: `python -m harness.launch.quiet_torchrun`.

torch.distributed.run ends every failed job with a ~35-line `ChildFailedError` traceback and an
ERROR log line, even when each rank has already said why in one line (a refused config) or
printed its own traceback. This entry point takes torchrun's arguments unchanged and ends with
the root cause's exit code instead (2 for a refused config, 130 after Ctrl-C); only a rank
killed by a signal, which could say nothing itself, gets a line here. The harness's own
launchers (`hydra/launcher=torchrun`, torchrun sweep trials) start their jobs through it.
Hydra's plugin scan imports this module in every Hydra app: torch is imported only when it runs.
"""
from __future__ import annotations

import logging
import signal
import sys
from typing import Any

AGENT_LOGGER = "torch.distributed.elastic.multiprocessing.api"  # logs "failed (exitcode: 2) ..." per job


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def root_failure(err: Any) -> tuple[int, Any]:
    """(rank, failure) of a ChildFailedError that caused the others. torchrun's own pick is the
    earliest error file or exit by whole seconds, so a rank the agent stopped with SIGTERM after
    another failed (one that was still writing its own refusal, say) can come first; a failure
    of the rank's own (an exit code, or another signal) outranks those stops."""
    failures = err.failures
    own = {rank: f for rank, f in failures.items() if f.exitcode != -signal.SIGTERM} or failures
    rank = min(own, key=lambda r: (own[r].timestamp, r))
    return rank, own[rank]


def exit_code_of(err: Any) -> int:
    """The root failure's exit code; a rank killed by signal N gives 128 + N, as a shell does."""
    _, failure = root_failure(err)
    return failure.exitcode if failure.exitcode > 0 else 128 - failure.exitcode


def killed_rank_line(err: Any) -> str | None:
    """One line for a root failure that was a signal (kill -9, the OOM killer, a segfault)."""
    rank, failure = root_failure(err)
    if failure.exitcode >= 0:
        return None
    return f"error: rank {rank} (pid {failure.pid}) was killed by {signal_name(-failure.exitcode)}"


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    logging.getLogger(AGENT_LOGGER).setLevel(logging.CRITICAL)
    try:
        run(parse_args(argv))
    except ChildFailedError as err:
        line = killed_rank_line(err)
        if line:
            print(line, file=sys.stderr)
        return exit_code_of(err)
    except SignalException as err:  # the launcher itself was stopped; its ranks were told to stop
        return 128 + int(err.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
