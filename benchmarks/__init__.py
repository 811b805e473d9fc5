"""Benchmarks for bookindex (run as modules from the repo root, e.g. `python -m benchmarks.tree_accuracy`)."""
