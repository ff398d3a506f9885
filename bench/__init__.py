"""Benchmarks: each module prints ratios measured side by side (python -m bench.NAME from the
repository root); the pathology suite, the external ports and their shared runner live here too."""
