"""Document rows written where they are made: each block's nodes (with their vectors and a
passage's sentence vectors), layout edges and communities as Lance fragments of those tables,
not committed (store/fragments.py); the rows go on without their heavy columns. It runs in the
last stage's worker (the enrich actor, after its call: no separate write tasks, whose workers
would wait for the enrich actors' CPUs and start afresh after them) or as a task of its own
(a job without enrich, or with the model's entity-resolution selections after enrich)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from bookindex.pipelines.rows import HEAVY, decode_vectors, from_json, to_json
from bookindex.pipelines.store import fragments
from bookindex.pipelines.store.layout_graph_store import graph_tables
from bookindex.pipelines.store.schemas import (
    COMMUNITIES,
    EDGES,
    NODES,
    communities_schema,
    edges_schema,
    nodes_schema,
)


def node_rows(batch: pa.Table, width: int) -> pa.Table:
    """Document rows → rows of the ``nodes`` table, vectors of ``width`` (null without
    enrich)."""
    rows: list[dict] = []
    has_vectors = "node_vectors" in batch.column_names
    for i, (doc_id, nodes_json) in enumerate(
        zip(batch.column("doc_id").to_pylist(), batch.column("nodes").to_pylist(), strict=True)
    ):
        nodes = from_json(nodes_json, [])
        vectors = None
        if has_vectors and nodes:
            vectors = decode_vectors(batch.column("node_vectors")[i].as_py(), len(nodes), width)
        sentences = _sentence_rows(batch, i, len(nodes), width)
        for j, node in enumerate(nodes):
            node["doc_id"] = doc_id
            node["summary"] = node.get("summary")
            node["vector"] = vectors[j].tolist() if vectors is not None else None
            node["sentence_vectors"] = sentences[j]
            rows.append(node)
    schema = nodes_schema(width)
    if not rows:
        return schema.empty_table()
    return pa.Table.from_pylist(rows, schema=schema)


def write_document_rows(batch: pa.Table, out_dir: str, width: int | None) -> pa.Table:
    """Document rows → the same rows without their heavy columns (``rows.HEAVY``), their
    nodes, edges and communities written as Lance fragments of those tables, not committed
    (store/fragments.py): the block's fragments, as JSON ``{table: [fragment, ...]}``, in the
    first row's ``fragments`` (the others' ``{}``); the driver commits them. ``width``: of
    the nodes' vectors (None: as the enrich stage's rows say, ``vector_width``)."""
    if width is None and "vector_width" in batch.column_names:
        width = next((w for w in batch.column("vector_width").to_pylist() if w), None)
    rows = batch.select(["doc_id", "edges", "communities"]).to_pylist()
    edges, communities = graph_tables(rows)
    written = {
        NODES: fragments.write(out_dir, NODES, node_rows(batch, width), nodes_schema(width)),
        EDGES: fragments.write(out_dir, EDGES, edges, edges_schema),
        COMMUNITIES: fragments.write(out_dir, COMMUNITIES, communities, communities_schema),
    }
    out = batch.drop_columns([c for c in HEAVY if c in batch.column_names])
    found = [to_json(written)] + [to_json({})] * (out.num_rows - 1)
    return out.append_column("fragments", pa.array(found[: out.num_rows], pa.string()))


def _sentence_rows(batch: pa.Table, i: int, n_nodes: int, width: int) -> list:
    """Row ``i``'s sentence vectors per node (lists of vectors; None where not counted)."""
    if "sentence_counts" not in batch.column_names:
        return [None] * n_nodes
    counts = from_json(batch.column("sentence_counts")[i].as_py(), [None] * n_nodes)
    total = sum(c for c in counts if c)
    raw = batch.column("sentence_vectors")[i].as_py() if total else b""
    flat = decode_vectors(raw, total, width) if total else np.zeros((0, width), np.float32)
    out, at = [], 0
    for count in counts:
        out.append(None if count is None else flat[at : at + count].tolist())
        at += count or 0
    return out
