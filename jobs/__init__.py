"""Command-line entry points (``python -m jobs.<name>``): thin CLIs over the typed configuration
of ``operators.config`` (docs/architecture.md §2)."""
