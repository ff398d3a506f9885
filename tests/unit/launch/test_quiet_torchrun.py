"""Which rank's failure the quiet torchrun reports: the one that caused the others."""
from __future__ import annotations

import signal

from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

from harness.launch.quiet_torchrun import exit_code_of, killed_rank_line


def _failure(rank: int, exitcode: int, timestamp: int) -> ProcessFailure:
    failure = ProcessFailure(local_rank=rank, pid=1000 + rank, exitcode=exitcode, error_file="<none>")
    failure.timestamp = timestamp
    return failure


def test_a_rank_the_agent_stopped_after_another_refused_is_not_the_cause():
    """Rank 1 wrote its refusal a second before rank 0 did and was stopped (SIGTERM) on its way
    out, once rank 0 had exited 2: the job refused its config, it was not killed."""
    err = ChildFailedError("train.py", {0: _failure(0, 2, 101), 1: _failure(1, -signal.SIGTERM, 100)})
    assert exit_code_of(err) == 2 and killed_rank_line(err) is None


def test_a_rank_killed_first_by_another_signal_is_the_cause():
    err = ChildFailedError("train.py", {0: _failure(0, 1, 101), 1: _failure(1, -signal.SIGKILL, 100)})
    assert exit_code_of(err) == 128 + signal.SIGKILL
    assert killed_rank_line(err) == "error: rank 1 (pid 1001) was killed by SIGKILL"


def test_ranks_stopped_alone_report_the_stop_and_a_tie_goes_to_the_lower_rank():
    err = ChildFailedError("train.py", {1: _failure(1, -signal.SIGTERM, 100), 0: _failure(0, -signal.SIGTERM, 100)})
    assert exit_code_of(err) == 128 + signal.SIGTERM
    assert killed_rank_line(err) == "error: rank 0 (pid 1000) was killed by SIGTERM"
    err = ChildFailedError("train.py", {1: _failure(1, 3, 100), 0: _failure(0, 2, 100)})
    assert exit_code_of(err) == 2
