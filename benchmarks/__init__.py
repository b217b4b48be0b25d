"""Benchmarks: `python -m benchmarks.run` (docs/benchmarks.md)."""
