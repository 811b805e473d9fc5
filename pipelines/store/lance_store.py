"""The index on disk: one Lance dataset per table under an index directory.

Readers use lance, lancedb (``lancedb.connect(index_dir).open_table("nodes")``), polars
(``pl.scan_pyarrow_dataset(lance.dataset(...))``) or Ray (``ray.data.read_lance``).
"""

from __future__ import annotations

from pathlib import Path

import lance
import pyarrow as pa

from pipelines.store.schemas import SCHEMAS


def table_path(index_dir: str | Path, table: str) -> str:
    return str(Path(index_dir) / f"{table}.lance")


def exists(index_dir: str | Path, table: str) -> bool:
    return Path(table_path(index_dir, table)).exists()


def read_table(index_dir: str | Path, table: str, columns: list[str] | None = None) -> pa.Table:
    """The whole table (empty, with the schema, when it does not exist yet)."""
    if not exists(index_dir, table):
        schema = SCHEMAS[table]
        if columns:
            schema = pa.schema([schema.field(c) for c in columns])
        return schema.empty_table()
    return lance.dataset(table_path(index_dir, table)).to_table(columns=columns)


def append(index_dir: str | Path, table: str, rows: pa.Table) -> None:
    """Append rows (cast to the table's schema); creates the dataset on first write."""
    if rows.num_rows == 0:
        return
    rows = rows.select(SCHEMAS[table].names).cast(SCHEMAS[table])
    mode = "append" if exists(index_dir, table) else "create"
    lance.write_dataset(rows, table_path(index_dir, table), mode=mode)


def delete_documents(index_dir: str | Path, table: str, doc_ids: list[str]) -> None:
    """Remove every row of these documents from a table (a no-op when it does not exist)."""
    delete_where(index_dir, table, "doc_id", doc_ids)


def delete_where(index_dir: str | Path, table: str, column: str, values: list[str]) -> None:
    """Remove rows whose ``column`` is one of ``values``."""
    if not values or not exists(index_dir, table):
        return
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in sorted(set(values)))
    lance.dataset(table_path(index_dir, table)).delete(f"{column} IN ({quoted})")
