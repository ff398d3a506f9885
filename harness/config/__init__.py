"""The run config: the composed Hydra config checked once, before any work, into a typed RunConfig."""
