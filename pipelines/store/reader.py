"""The query side's one reader of an index: the committed rows of each table, read once.

``read_index`` reads ``documents`` first and takes the committed documents from it (the one
commit rule, ``pipelines.store.recovery``), then every other table through
``recovery.read_committed`` with that same set, so all tables agree on one snapshot; the
columns are those the read model declares (``operators.query.read_model.COLUMNS``). The result
is a plain container of Arrow tables; ``operators.query.read_model.ReadModel`` is built from it
without further I/O.

    engine = open_engine("index_dir", config)       # operators.query.engine.QueryEngine
    engine.answer("...", method="bookrag", doc="paper.pdf")
    engine.retrieval.retrieve(["..."], "zoom", k=10)
"""

from __future__ import annotations

import time
from pathlib import Path

import lance

from bookindex.operators.config import BookindexConfig
from bookindex.operators.models import ModelBackend, load_backend
from bookindex.operators.query.engine import QueryEngine
from bookindex.operators.query.read_model import COLUMNS, OPTIONAL_COLUMNS, IndexTables, ReadModel
from bookindex.pipelines.store import lance_store, recovery
from bookindex.pipelines.store.schemas import DOCUMENTS


def read_index(index_dir: str | Path) -> IndexTables:
    """The committed rows of every table the read model uses (FileNotFoundError: no index)."""
    if not lance_store.exists(index_dir, DOCUMENTS):
        raise FileNotFoundError(f"no index at {index_dir} (no documents table)")
    documents = lance_store.read_table(index_dir, DOCUMENTS, COLUMNS["documents"])
    committed = recovery.committed_doc_ids(index_dir, documents)
    tables = {
        name: recovery.read_committed(
            index_dir, name, _present(index_dir, name, columns), committed
        )
        for name, columns in COLUMNS.items()
        if name != "documents"
    }
    return IndexTables(documents=documents, **tables)


def _present(index_dir: str | Path, table: str, columns: list[str]) -> list[str]:
    """``columns`` without the optional ones the stored table lacks (an older index)."""
    optional = OPTIONAL_COLUMNS.get(table, [])
    if not optional or not lance_store.exists(index_dir, table):
        return columns  # no table yet: its empty read has every column
    stored = set(lance.dataset(lance_store.table_path(index_dir, table)).schema.names)
    return [c for c in columns if c not in optional or c in stored]


def open_read_model(index_dir: str | Path, backend: ModelBackend | None = None) -> ReadModel:
    started = time.perf_counter()
    model = ReadModel.from_tables(read_index(index_dir), backend)
    model.timings["open_s"] = time.perf_counter() - started
    return model


def open_engine(
    index_dir: str | Path,
    config: BookindexConfig | None = None,
    backend: ModelBackend | None = None,
) -> QueryEngine:
    """The query engine over an index: its read model with the configured model backend (or
    ``backend``) and a walk engine on the configured device, whose graph is kept in the
    index directory (``operators.walks.graph_store``; a local directory only)."""
    config = config or BookindexConfig()
    model = open_read_model(index_dir, backend or load_backend(config.models))
    return QueryEngine(model, config, graph_dir=None if "://" in str(index_dir) else index_dir)


def index_version(index_dir: str | Path) -> int:
    """The Lance version of ``documents``: it changes with every committed index update."""
    if not lance_store.exists(index_dir, DOCUMENTS):
        return 0
    return lance.dataset(lance_store.table_path(index_dir, DOCUMENTS)).version
