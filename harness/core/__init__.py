"""Leaves every layer may import: errors, typed config readers, value checks, metric names, calling user code, the keys the config may hold, torchrun facts and sharded tensor norms."""
