"""Modules of another commit's source tree, for the benchmarks that measure it beside this one.

A benchmark's child process runs with that tree as its working directory and on
``PYTHONPATH``. Trees from before the ``bookindex`` package keep their code under the top-level
names (``operators``, ``pipelines``, ``jobs``); later trees under ``bookindex.``. Importing
``bookindex.…`` in an older tree would silently load this checkout's editable install instead,
so children import through ``tree_module``, which picks the tree's own layout.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType


def tree_prefix(tree: Path | None = None) -> str:
    """``"bookindex."`` where ``tree`` (default: the working directory) has the package, else
    ``""`` (a tree from before it)."""
    root = Path.cwd() if tree is None else tree
    return "bookindex." if (root / "bookindex" / "__init__.py").is_file() else ""


def tree_module(name: str) -> ModuleType:
    """The module ``name`` (for example ``"pipelines.index_pipeline"``) of the tree in the
    working directory."""
    return importlib.import_module(tree_prefix() + name)
