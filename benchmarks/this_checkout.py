"""This checkout's ``benchmarks`` package for a benchmark run as a script in another commit's tree
(``--start``: the child runs with that tree first on ``PYTHONPATH``, whose ``benchmarks`` may lack
the helpers the script imports). A script imports this module beside itself (its directory is
``sys.path[0]``) before any ``from benchmarks...`` import."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def load_benchmarks() -> None:
    """Make ``benchmarks`` this checkout's package (nothing to do where it is imported already,
    as under ``python -m benchmarks.<name>``)."""
    if "benchmarks" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(
        "benchmarks",
        REPO_ROOT / "benchmarks" / "__init__.py",
        submodule_search_locations=[str(REPO_ROOT / "benchmarks")],
    )
    sys.modules["benchmarks"] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules["benchmarks"])
