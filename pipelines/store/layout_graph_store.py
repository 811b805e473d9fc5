"""The ``edges`` and ``communities`` tables (the LAD-RAG document graph; docs/architecture.md §4).

The index job computes each document's graph at assemble time (``operators.graph.layout_graph``)
and carries it as JSON columns; ``graph_tables`` makes those rows, which the job writes as
fragments (``pipelines.store.fragments``) and commits edges first, then communities. ``backfill_layout_graph`` computes the graph from the stored ``nodes`` of
documents that have none (indexes built before the graph existed, or a run stopped half-way
through a backfill); a document counts as done when it has ``communities`` rows, the table
written last.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import lance
import pyarrow as pa
import pyarrow.compute as pc

from bookindex.operators.graph.layout_graph import document_communities, document_edges
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import (
    COMMUNITIES,
    DOCUMENTS,
    EDGES,
    NODES,
    communities_schema,
    edges_schema,
)

BACKFILL_DOCS = 64  # documents read from ``nodes`` at a time
_NODE_COLUMNS = [
    "doc_id",
    "node_id",
    "parent_id",
    "kind",
    "title",
    "text",
    "page_start",
    "page_end",
    "bbox",
    "order",
]


def graph_tables(rows: Iterable[dict]) -> tuple[pa.Table, pa.Table]:
    """Per-document rows (doc_id, edges JSON, communities JSON) → edges and communities rows."""
    edges: list[dict] = []
    communities: list[dict] = []
    for row in rows:
        edges += json.loads(row.get("edges") or "[]")
        found = json.loads(row.get("communities") or "{}")
        doc_id = row["doc_id"]
        communities += [{"doc_id": doc_id, "node_id": n, "community": c} for n, c in found.items()]
    return (
        pa.Table.from_pylist(edges, schema=edges_schema),
        pa.Table.from_pylist(communities, schema=communities_schema),
    )


def _doc_ids(index_dir: str | Path, table: str) -> set[str]:
    """The distinct doc_id of a table, read batch by batch (the column only)."""
    if not lance_store.exists(index_dir, table):
        return set()
    found: set[str] = set()
    dataset = lance.dataset(lance_store.table_path(index_dir, table))
    for batch in dataset.to_batches(columns=["doc_id"]):
        found.update(pc.unique(batch.column("doc_id")).to_pylist())
    return found


def missing_layout_graph(index_dir: str | Path) -> list[str]:
    """Indexed documents (not failed, with nodes) that have no ``communities`` rows."""
    if not lance_store.exists(index_dir, DOCUMENTS) or not lance_store.exists(index_dir, NODES):
        return []
    docs = lance_store.read_table(index_dir, DOCUMENTS, ["doc_id", "status", "n_nodes"])
    wanted = {
        d
        for d, status, n in zip(
            docs["doc_id"].to_pylist(),
            docs["status"].to_pylist(),
            docs["n_nodes"].to_pylist(),
            strict=True,
        )
        if status != "failed" and (n or 0) > 0
    }
    return sorted(wanted - _doc_ids(index_dir, COMMUNITIES))


def backfill_layout_graph(index_dir: str | Path, seed: int = 0) -> int:
    """Compute and store the graph of every document that lacks one; → documents done."""
    missing = missing_layout_graph(index_dir)
    if not missing:
        return 0
    nodes_table = lance.dataset(lance_store.table_path(index_dir, NODES))
    done = 0
    for start in range(0, len(missing), BACKFILL_DOCS):
        chunk = missing[start : start + BACKFILL_DOCS]
        for table in (EDGES, COMMUNITIES):  # rows a stopped backfill left behind
            lance_store.delete_documents(index_dir, table, chunk)
        quoted = ", ".join("'" + d.replace("'", "''") + "'" for d in chunk)
        rows = nodes_table.to_table(columns=_NODE_COLUMNS, filter=f"doc_id IN ({quoted})")
        by_doc: dict[str, list[dict]] = {}
        for node in rows.to_pylist():
            by_doc.setdefault(node["doc_id"], []).append(node)
        edges: list[dict] = []
        communities: list[dict] = []
        for doc_id in chunk:
            nodes = by_doc.get(doc_id, [])
            if not nodes:
                continue
            doc_edges = document_edges(nodes, doc_id)
            found = document_communities(nodes, doc_edges, seed=seed)
            edges += doc_edges
            communities += [
                {"doc_id": doc_id, "node_id": n, "community": c} for n, c in found.items()
            ]
            done += 1
        lance_store.append(index_dir, EDGES, pa.Table.from_pylist(edges, schema=edges_schema))
        lance_store.append(
            index_dir, COMMUNITIES, pa.Table.from_pylist(communities, schema=communities_schema)
        )
    return done
