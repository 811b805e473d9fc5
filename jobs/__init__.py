"""The commands behind ``bookindex <command>`` (``bookindex/cli.py``; each also runs as
``python -m bookindex.jobs.<name>``): thin CLIs over the typed configuration of
``operators.config`` (docs/architecture.md §2), their output through ``jobs.console``."""
