"""The index on disk: one Lance dataset per table under an index directory.

Readers use lance, lancedb (``lancedb.connect(index_dir).open_table("nodes")``), polars
(``pl.scan_pyarrow_dataset(lance.dataset(...))``) or Ray (``ray.data.read_lance``).
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

from bookindex.operators.config import ConfigError
from bookindex.pipelines.store.schemas import SCHEMAS, VECTOR_TABLES, schema_for


def table_path(index_dir: str | Path, table: str) -> str:
    return str(Path(index_dir) / f"{table}.lance")


def exists(index_dir: str | Path, table: str) -> bool:
    return Path(table_path(index_dir, table)).exists()


def read_table(index_dir: str | Path, table: str, columns: list[str] | None = None) -> pa.Table:
    """The whole table (empty, with the schema, when it does not exist yet)."""
    if not exists(index_dir, table):
        schema = schema_for(table)
        if columns:
            schema = pa.schema([schema.field(c) for c in columns])
        return schema.empty_table()
    return lance.dataset(table_path(index_dir, table)).to_table(columns=columns)


def append(index_dir: str | Path, table: str, rows: pa.Table) -> None:
    """Append rows (cast to the table's schema); creates the dataset on first write. For the
    tables without vectors (``nodes`` and ``entities`` are written whole by their writers)."""
    if rows.num_rows == 0:
        return
    rows = rows.select(SCHEMAS[table].names).cast(SCHEMAS[table])
    mode = "append" if exists(index_dir, table) else "create"
    if mode == "append":
        add_missing_columns(index_dir, table)
    lance.write_dataset(rows, table_path(index_dir, table), mode=mode)


def add_missing_columns(index_dir: str | Path, table: str) -> list[str]:
    """Columns of the table's schema that an older dataset lacks, added as nulls (one commit);
    their names."""
    if not exists(index_dir, table):
        return []
    dataset = lance.dataset(table_path(index_dir, table))
    missing = [f for f in SCHEMAS[table] if f.name not in dataset.schema.names]
    if missing:
        dataset.add_columns(missing)
    return [f.name for f in missing]


def delete_documents(index_dir: str | Path, table: str, doc_ids: list[str]) -> None:
    """Remove every row of these documents from a table (a no-op when it does not exist)."""
    delete_where(index_dir, table, "doc_id", doc_ids)


def delete_where(index_dir: str | Path, table: str, column: str, values: list[str]) -> None:
    """Remove rows whose ``column`` is one of ``values``."""
    if not values or not exists(index_dir, table):
        return
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in sorted(set(values)))
    lance.dataset(table_path(index_dir, table)).delete(f"{column} IN ({quoted})")


def vector_width(index_dir: str | Path) -> int | None:
    """The width of the vectors an index holds (its ``nodes``, else its ``entities`` table);
    None before either exists."""
    for table in VECTOR_TABLES:
        if exists(index_dir, table):
            field = lance.dataset(table_path(index_dir, table)).schema.field("vector")
            return field.type.list_size
    return None


def check_vector_width(index_dir: str | Path, width: int | None) -> int | None:
    """The width the index's vectors have, or will have: the stored one, else ``width`` (the
    configured embedder's; None: not known yet). Refuses a configured width that differs from
    the stored one: vectors of two models cannot share a table or a similarity."""
    stored = vector_width(index_dir)
    if stored is not None and width is not None and stored != width:
        raise ConfigError(
            f"{index_dir} holds {stored}-dimensional vectors, and the configured embedding model "
            f"makes {width}-dimensional ones: configure the model this index was built with, "
            "or index into a new directory"
        )
    return stored if stored is not None else width


def check_columns(index_dir: str | Path, table: str) -> None:
    """Refuses to write to a table an older index job made without some of today's columns
    (Lance appends need the stored schema): the message says to re-index."""
    if not exists(index_dir, table):
        return
    stored = set(lance.dataset(table_path(index_dir, table)).schema.names)
    missing = [name for name in schema_for(table).names if name not in stored]
    if missing:
        raise ConfigError(
            f"{index_dir} was built by an older index job: its {table} table lacks "
            f"{', '.join(missing)}; re-index into a new directory (the old one still answers "
            "queries, except where it lacks these)"
        )
