"""Rows written where they are made, committed by the driver: Lance fragments.

The index job's tasks write the rows of their documents (``nodes``, ``edges``,
``communities``) as data files of the table (``write``: Lance fragments, invisible to every
reader) and hand back the fragments' metadata as JSON; the driver, holding the index lock, makes
each table's fragments visible in one commit (``commit``: a new version that appends them, or
the table's first version). So the rows cross no second pass over the documents, and a table
has one new version per run, as with Ray's ``write_lance`` (which writes the same way).

A job killed before a commit leaves data files no version refers to: readers never see them;
the first write of a table leaves a directory without a manifest, which
``recovery.remove_uncommitted_tables`` removes under the next job's lock.
"""

from __future__ import annotations

import json
from pathlib import Path

import lance
import pyarrow as pa
from lance.fragment import FragmentMetadata, write_fragments

from bookindex.pipelines.store import lance_store


def write(index_dir: str | Path, table: str, rows: pa.Table, schema: pa.Schema) -> list[str]:
    """``rows`` (cast to ``schema``) as data files of ``table``, not committed; their
    fragments' metadata as JSON strings (none for no rows)."""
    if rows.num_rows == 0:
        return []
    rows = rows.select(schema.names).cast(schema)
    path = lance_store.table_path(index_dir, table)
    return [json.dumps(f.to_json()) for f in write_fragments(rows, path, schema=schema)]


def commit(index_dir: str | Path, table: str, schema: pa.Schema, fragments: list[str]) -> int:
    """Make the written ``fragments`` (``write``) of ``table`` visible in one commit: appended
    to the table, or its first version (``schema``) when it does not exist yet; → rows."""
    if not fragments:
        return 0
    found = [FragmentMetadata.from_json(f) for f in fragments]
    path = lance_store.table_path(index_dir, table)
    if any(Path(path, "_versions").glob("*.manifest")):  # the table exists (committed)
        read_version = lance.dataset(path).version
        lance.LanceDataset.commit(path, lance.LanceOperation.Append(found), read_version)
    else:
        lance.LanceDataset.commit(path, lance.LanceOperation.Overwrite(schema, found))
    return sum(f.physical_rows for f in found)
