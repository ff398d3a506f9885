"""torchrun, for a SLURM job: its agent ignores SIGUSR1 and SIGUSR2.

SLURM's warning before a time limit, and the signal the job passes on, go to every process of
the job. The training ranks checkpoint and exit on them (they install their own handlers);
torchrun's agent has none, and would die of them at once, taking its ranks down before they
could save. Ignoring them here lets the agent see its ranks finish instead.

    python -m hydra_plugins.harness_slurm_launcher.torchrun_agent TORCHRUN_FLAGS train.py ...
"""
import runpy
import signal

if __name__ == "__main__":
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
