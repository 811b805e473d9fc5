"""The output directory of an index job, checked before any work.

``check_index_dir`` passes a directory that does not exist yet (its nearest existing parent
writable), an empty one, or an index (``*.lance`` tables and the job's own files) that this
user can write and whose tables open and have their data files. Anything else is an
``IndexDirError`` (a ``ConfigError``: the job exits 2 before it starts Ray or reads a PDF) that
names the damage and what to do.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import lance

from bookindex.operators.config import ConfigError
from bookindex.pipelines.run_stats import STATS_FILE
from bookindex.pipelines.store.index_lock import BREAK_FILE, LOCK_FILE
from bookindex.pipelines.store.schemas import TABLES

_TABLE_DIRS = {f"{table}.lance" for table in TABLES}
_JOB_FILES = {STATS_FILE, Path(STATS_FILE).with_suffix(".tmp").name, LOCK_FILE, BREAK_FILE}


class IndexDirError(ConfigError):
    """The output directory cannot take this index: the message says why and what to do."""


def check_index_dir(out_dir: str | Path, tables: bool = True) -> None:
    """Raise ``IndexDirError`` unless ``out_dir`` can be an index directory (see above).
    ``tables``: open each table too; only under the index lock (another job may be creating
    them: run_index checks the rest first, takes the lock, then the tables)."""
    path = Path(out_dir)
    if path.exists() and not path.is_dir():
        raise IndexDirError(
            f"--out {path} is a file, not a directory: give a new directory, an empty one "
            "or an existing index"
        )
    if not path.exists():
        parent = next(p for p in path.absolute().parents if p.exists())
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise IndexDirError(
                f"--out {path} cannot be created: {parent} is not a writable directory"
            )
        return
    _check_writable(path)
    entries = sorted(p.name for p in path.iterdir())
    found = [name for name in entries if name in _TABLE_DIRS]
    if not found:
        others = [name for name in entries if name not in _JOB_FILES]
        if others:
            listed = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
            raise IndexDirError(
                f"--out {path} is neither empty nor an index (it holds {listed}): give a new "
                "or empty directory, or an index directory"
            )
        return
    for name in found if tables else []:
        _check_table(path / name)


def _check_writable(path: Path) -> None:
    try:
        with tempfile.TemporaryFile(dir=path, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise IndexDirError(
            f"--out {path} is not writable ({exc.strerror}): give a directory this user can "
            "write, or fix its permissions (or remount it read-write)"
        ) from None


def _check_table(table: Path) -> None:
    damaged = f"damaged index: table {table.name} in {table.parent}"
    what_to_do = (
        "restore the directory from a backup, or index into a new directory (the index can be "
        "rebuilt from its inputs)"
    )
    if not table.is_dir():
        raise IndexDirError(
            f"{damaged} is a file, not a Lance dataset directory: move it out of the way "
            f"(if it is not yours to delete) and run again; if the index had data, {what_to_do}"
        )
    try:
        dataset = lance.dataset(str(table))
        fragments = dataset.get_fragments()
    except Exception as exc:  # lance raises OSError, ValueError or its own errors
        raise IndexDirError(f"{damaged} cannot be opened ({exc}): {what_to_do}") from None
    for fragment in fragments:
        for data_file in fragment.data_files():
            if not (table / "data" / data_file.path).is_file():
                raise IndexDirError(
                    f"{damaged} is missing its data file data/{data_file.path}: {what_to_do}"
                )
