"""Crash consistency of an index: ``documents`` is the commit marker.

A run writes every other table first — ``nodes``, ``edges`` and ``communities`` (each one
commit of the fragments the job's tasks wrote, ``store/fragments.py``), ``mentions``,
``relations``, ``er_decisions``, ``entities`` (rewritten whole), the documents' ``failures`` —
and appends the ``documents`` rows last. So:

- a row of a per-document table is *visible* only when its ``doc_id`` is in ``documents``
  (``committed_doc_ids``, ``read_committed``; the query side's reader,
  ``pipelines.store.reader``, reads every table this way);
- a run killed before its commit leaves rows whose ``doc_id`` is not in ``documents``:
  ``recover`` (called first by ``run_index``) deletes them, so the restarted run indexes those
  documents again, exactly once;
- a table rewritten as a whole (``entities``) is tagged ``committed`` at every commit (a Lance
  tag on the version then current); ``recover`` restores the tagged version when an interrupted
  run left orphans, so entity resolution restarts from the committed entity set, not from one
  holding the killed run's entities.

Every Lance write is itself atomic (a new version becomes visible in one manifest commit), so a
reader sees a table either before or after a write, never half of it. A job killed during the
*first* write of a table leaves a table directory without any manifest (data files only):
``remove_uncommitted_tables`` removes it. A job killed after its tasks wrote a table's data
files (``store/fragments.py``) and before the driver committed them leaves files no version
references: ``recover`` removes them (``remove_unreferenced_files``, every version kept). One indexing job at a time per index: every job holds the index lock
(``index_lock.py``) while it recovers and writes, so the rows and files ``recover`` deletes are
always a dead job's.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc

from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import (
    COMMUNITIES,
    DOCUMENTS,
    EDGES,
    ENTITIES,
    ER_DECISIONS,
    FAILURES,
    MENTIONS,
    NODES,
    RELATIONS,
    SCHEMAS,
    SECTION_DECISIONS,
    TABLES,
)

# Tables with one or more rows per document (keyed by doc_id); failures rows with an empty
# doc_id are discovery problems (keyed by uri) and belong to no document.
PER_DOCUMENT_TABLES = (
    NODES,
    EDGES,
    COMMUNITIES,
    MENTIONS,
    RELATIONS,
    ER_DECISIONS,
    SECTION_DECISIONS,
    FAILURES,
)
# Tables rewritten as a whole by a run: rolled back to their version at the last commit.
REWRITTEN_TABLES = (ENTITIES,)
COMMIT_TAG = "committed"


@dataclass
class Recovery:
    orphans: dict[str, int] = field(default_factory=dict)  # table → rows deleted
    restored: dict[str, int] = field(default_factory=dict)  # table → version restored
    removed_files: dict[str, int] = field(default_factory=dict)  # table → unreferenced files

    @property
    def interrupted(self) -> bool:
        return bool(self.orphans)


def committed_doc_ids(index_dir: str | Path, documents: pa.Table | None = None) -> set[str]:
    """The documents a reader may see: those with a row in ``documents`` (the table as read
    already, when given, so that a reader takes every table from one snapshot)."""
    if documents is None:
        documents = lance_store.read_table(index_dir, DOCUMENTS, ["doc_id"])
    return set(documents["doc_id"].to_pylist())


def read_committed(
    index_dir: str | Path,
    table: str,
    columns: list[str] | None = None,
    committed: set[str] | None = None,
) -> pa.Table:
    """A per-document table without the rows of uncommitted documents (``documents`` is read
    first, so rows committed after it are left out too; rows with no doc_id are kept).
    ``committed``: the committed documents as a reader already took them."""
    if committed is None:
        committed = committed_doc_ids(index_dir)
    wanted = columns if columns is None or "doc_id" in columns else [*columns, "doc_id"]
    rows = _read(index_dir, table, wanted)
    if "doc_id" not in rows.column_names:
        return rows
    keep = pc.or_(
        pc.is_in(rows["doc_id"], value_set=pa.array(sorted(committed), pa.string())),
        pc.equal(rows["doc_id"], ""),  # a discovery failure belongs to no document
    )
    rows = rows.filter(keep)
    return rows if wanted is columns else rows.select(columns)


def recover(index_dir: str | Path) -> Recovery:
    """Undo what an interrupted run left behind (see the module docstring); a no-op on a
    consistent index, apart from (re)tagging the committed versions."""
    result = Recovery()
    committed = committed_doc_ids(index_dir)
    for table in PER_DOCUMENT_TABLES:
        orphans = _orphan_ids(index_dir, table, committed)
        if orphans:
            before = _count(index_dir, table)
            lance_store.delete_documents(index_dir, table, sorted(orphans))
            result.orphans[table] = before - _count(index_dir, table)
    if result.interrupted:
        for table in REWRITTEN_TABLES:
            version = _roll_back(index_dir, table, has_commit=bool(committed))
            if version is not None:
                result.restored[table] = version
    else:  # consistent: whatever is there now is committed (a kill after the documents append)
        mark_committed(index_dir)
    result.removed_files = remove_unreferenced_files(index_dir)
    return result


def remove_unreferenced_files(index_dir: str | Path) -> dict[str, int]:
    """Delete each table's data and deletion files that no version of it references (a killed
    job's uncommitted writes, which no reader sees), keeping every version; table → files
    removed. Lance's ``cleanup_old_versions`` does not fit: it removes old versions and their
    files, and in pylance 4.0 leaves a file no version ever referenced even with
    ``delete_unverified``. Safe only while no other process writes the index: call it under
    the index lock."""
    removed = {}
    for table in TABLES:
        if not lance_store.exists(index_dir, table):
            continue
        path = Path(lance_store.table_path(index_dir, table))
        referenced: set[str] = set()
        for version in lance.dataset(str(path)).versions():
            for fragment in lance.dataset(str(path), version=version["version"]).get_fragments():
                referenced.update(f"data/{f.path}" for f in fragment.data_files())
                if fragment.deletion_file():
                    referenced.add(fragment.deletion_file())
        stray = [
            file
            for folder in ("data", "_deletions")
            if (path / folder).is_dir()
            for file in (path / folder).iterdir()
            if file.is_file() and f"{folder}/{file.name}" not in referenced
        ]
        for file in stray:
            file.unlink()
        if stray:
            removed[table] = len(stray)
    return removed


def remove_uncommitted_tables(index_dir: str | Path) -> list[str]:
    """Remove the table directories whose first write never committed (no manifest under
    ``_versions``: only data files of a killed job, invisible to every reader); their names.
    Call under the index lock."""
    removed = []
    for table in TABLES:
        path = Path(lance_store.table_path(index_dir, table))
        if path.is_dir() and not any((path / "_versions").glob("*.manifest")):
            shutil.rmtree(path)
            removed.append(table)
    return removed


def mark_committed(index_dir: str | Path) -> None:
    """Tag the current version of every whole-table rewrite as the committed one."""
    for table in REWRITTEN_TABLES:
        if not lance_store.exists(index_dir, table):
            continue
        dataset = lance.dataset(lance_store.table_path(index_dir, table))
        tags = dataset.tags.list()
        if COMMIT_TAG not in tags:
            dataset.tags.create(COMMIT_TAG, dataset.version)
        elif tags[COMMIT_TAG]["version"] != dataset.version:
            dataset.tags.update(COMMIT_TAG, dataset.version)


def _roll_back(index_dir: str | Path, table: str, has_commit: bool) -> int | None:
    """Back to the tagged version. Without a tag: empty the table when nothing was ever
    committed (the interrupted run was the first), else recount ``entities`` from the
    committed mentions (an index written before tags existed)."""
    if not lance_store.exists(index_dir, table):
        return None
    path = lance_store.table_path(index_dir, table)
    dataset = lance.dataset(path)
    tags = dataset.tags.list()
    if COMMIT_TAG in tags:
        version = tags[COMMIT_TAG]["version"]
        if version == dataset.version:
            return None
        lance.dataset(path, version=version).restore()
        return version
    if not has_commit:
        schema = SCHEMAS.get(table, dataset.schema)  # entities: of the stored width
        lance.write_dataset(schema.empty_table(), path, mode="overwrite")
        return 0
    if table == ENTITIES:
        refresh_entities(index_dir)
    return None


def refresh_entities(index_dir: str | Path) -> int:
    """Entity mention counts from ``mentions`` again; entities no one mentions are removed."""
    if not lance_store.exists(index_dir, ENTITIES):
        return 0
    import numpy as np

    from bookindex.pipelines.store.entity_tables import rewrite_entities

    stored = lance_store.read_table(index_dir, ENTITIES).to_pylist()
    corpus = [r for r in stored if not r["doc_id"]]
    keys = ("entity_id", "name", "type", "description", "aliases")
    width = lance_store.vector_width(index_dir)
    vectors = np.asarray([r["vector"] for r in corpus], np.float32).reshape(len(corpus), width)
    canonical = [{k: r[k] for k in keys} for r in corpus]
    return rewrite_entities(index_dir, canonical, vectors)["entities"]


def _read(index_dir: str | Path, table: str, columns: list[str] | None) -> pa.Table:
    if table in TABLES:
        return lance_store.read_table(index_dir, table, columns)
    if not lance_store.exists(index_dir, table):
        return pa.table({})
    return lance.dataset(lance_store.table_path(index_dir, table)).to_table(columns=columns)


def _orphan_ids(index_dir: str | Path, table: str, committed: set[str]) -> set[str]:
    if not lance_store.exists(index_dir, table):
        return set()
    dataset = lance.dataset(lance_store.table_path(index_dir, table))
    if "doc_id" not in dataset.schema.names:
        return set()
    ids = set(pc.unique(dataset.to_table(columns=["doc_id"])["doc_id"]).to_pylist())
    return {d for d in ids if d and d not in committed}


def _count(index_dir: str | Path, table: str) -> int:
    return lance.dataset(lance_store.table_path(index_dir, table)).count_rows()
