"""Process start-up before and around Hydra: one-line errors and exit codes (cli), the mode probe, run-dir name resolvers, a torchrun rank's death with its launcher."""
