"""torchrun, for a SLURM job: its agent ignores SIGUSR1 and SIGUSR2.

SLURM's warning before a time limit, and the signal the job passes on, go to every process of
the job. The training ranks checkpoint and exit on them (they install their own handlers);
torchrun's agent has none, and would die of them at once, taking its ranks down before they
could save. Ignoring them here lets the agent see its ranks finish instead. The agent is the
harness's quiet torchrun, so a failed job ends in its ranks' own words and exit code.

    python -m hydra_plugins.harness_slurm_launcher.torchrun_agent TORCHRUN_FLAGS train.py ...
"""
import signal
import sys

from harness.launch.quiet_torchrun import main

if __name__ == "__main__":
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    sys.exit(main())
