"""Whether an index's files are all there: the data files (and deletion files) every table's
current version references, present with the sizes its manifest records.

A reader that opened an index holds what it read; a data file removed, truncated or replaced
on disk afterwards shows only when something reads it again (a reload, a query that reaches
it). ``damaged_files`` looks without reading any data: one manifest per table and one ``stat``
per file, so the Serve application runs it on every non-forced reload and health probe
(``pipelines/serve_app.py``). It names the problems by table and file name, relative to the
index directory. A file rewritten in place with its size unchanged is not noticed.
"""

from __future__ import annotations

from pathlib import Path

import lance

from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import TABLES


def damaged_files(index_dir: str | Path) -> list[str]:
    """One line per problem: a table whose current version cannot be opened, a data or
    deletion file it references that is missing or of another size than recorded."""
    problems = []
    for table in TABLES:
        path = Path(lance_store.table_path(index_dir, table))
        if not path.exists():
            continue  # a table the index never wrote (no enrich, no refiner)
        try:
            fragments = lance.dataset(str(path)).get_fragments()
        except Exception as exc:  # a manifest that does not open: the table is damaged
            problems.append(f"{table}: cannot be opened ({type(exc).__name__})")
            continue
        for fragment in fragments:
            for data in fragment.data_files():
                problems += _checked(table, path / "data" / data.path, data.file_size_bytes)
            deletion = fragment.deletion_file()
            if deletion:
                file = Path(deletion) if Path(deletion).is_absolute() else path / deletion
                problems += _checked(table, file, None)
    return problems


def _checked(table: str, file: Path, size: int | None) -> list[str]:
    try:
        found = file.stat().st_size
    except OSError:
        return [f"{table}: {file.name} is missing"]
    if size is not None and found != size:
        return [f"{table}: {file.name} holds {found} bytes, its manifest records {size}"]
    return []
