"""The entity tables of an index: ``mentions`` (entity → node links), ``relations`` and
``er_decisions`` appended per document, ``entities`` rewritten as a whole (atomically, with
mention counts; entities no document mentions any more drop out), and the LanceDB search indexes
over nodes and entities. The corpus resolver that decides the entities is
``pipelines.entity_graph``.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

from bookindex.operators.graph.entities import STRUCTURAL_TYPES
from bookindex.pipelines.rows import decode_vectors, from_json
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import (
    ENTITIES,
    ER_DECISIONS,
    MENTIONS,
    NODES,
    RELATIONS,
    schema_for,
)


def write_entity_tables(
    index_dir: str | Path,
    doc_rows: list[dict],
    results: list[dict],
    canonical: list[dict],
    canonical_vectors: np.ndarray,
) -> dict[str, int]:
    """Append mentions, relations and decisions of the new documents; rewrite ``entities``
    (vectors of the canonical vectors' width)."""
    now = datetime.now(UTC)
    width = canonical_vectors.shape[1]
    by_doc = {r["doc_id"]: r for r in doc_rows}
    mentions, relations, decisions = [], [], []
    structural: dict[str, dict] = {}
    for result in results:
        doc = by_doc[result["doc_id"]]
        doc_id, ids = doc["doc_id"], result["entity_ids"]
        entities = from_json(doc["entities"])
        vectors = decode_vectors(doc["entity_vectors"], len(entities), width)
        for entity, entity_id, vector in zip(entities, ids, vectors, strict=True):
            for node_id in entity["node_ids"]:
                mentions.append(
                    {
                        "entity_id": entity_id,
                        "doc_id": doc_id,
                        "node_id": node_id,
                        "name": entity["name"],
                    }
                )
            if entity["type"] in STRUCTURAL_TYPES:
                structural[entity_id] = {
                    "entity_id": entity_id,
                    "name": entity["name"],
                    "type": entity["type"],
                    "description": entity["description"],
                    "aliases": [],
                    "vector": vector.tolist(),
                    "doc_id": doc_id,
                }
        weights: Counter[tuple] = Counter()
        described: dict[tuple, str] = {}
        for r in from_json(doc["relations"]):
            key = (ids[r["source"]], ids[r["target"]], r["type"], r["node_id"])
            if key[0] != key[1]:
                weights[key] += r["weight"]
                described.setdefault(key, r["description"])
        relations += [
            {
                "src_entity": s,
                "dst_entity": d,
                "type": t,
                "description": described[(s, d, t, n)],
                "doc_id": doc_id,
                "node_id": n,
                "weight": w,
            }
            for (s, d, t, n), w in sorted(weights.items())
        ]
        for scope, items in (
            ("document", from_json(doc["er_decisions"])),
            ("corpus", result["decisions"]),
        ):
            decisions += [dict(d, doc_id=doc_id, scope=scope, decided_at=now) for d in items]
    lance_store.append(index_dir, MENTIONS, _table(MENTIONS, mentions))
    lance_store.append(index_dir, RELATIONS, _table(RELATIONS, relations))
    lance_store.append(index_dir, ER_DECISIONS, _table(ER_DECISIONS, decisions))
    return rewrite_entities(index_dir, canonical, canonical_vectors, structural)


def rewrite_entities(
    index_dir: str | Path,
    canonical: list[dict],
    canonical_vectors: np.ndarray,
    new_structural: dict[str, dict] | None = None,
) -> dict[str, int]:
    """The ``entities`` table from the canonical set, the stored and new document-local
    entities, and the mention counts now in ``mentions``."""
    counts: Counter[str] = Counter()
    documents: defaultdict[str, set] = defaultdict(set)
    if lance_store.exists(index_dir, MENTIONS):
        m = lance_store.read_table(index_dir, MENTIONS, ["entity_id", "doc_id"])
        for entity_id, doc_id in zip(
            m.column("entity_id").to_pylist(), m.column("doc_id").to_pylist(), strict=True
        ):
            counts[entity_id] += 1
            documents[entity_id].add(doc_id)
    rows = [
        dict(r, vector=v.tolist(), doc_id="")
        for r, v in zip(canonical, canonical_vectors, strict=True)
    ]
    stored = lance_store.read_table(index_dir, ENTITIES).to_pylist()
    local = {r["entity_id"]: r for r in stored if r["doc_id"]}
    local.update(new_structural or {})
    rows += list(local.values())
    rows = [
        dict(r, n_mentions=counts[r["entity_id"]], n_documents=len(documents[r["entity_id"]]))
        for r in rows
        if counts[r["entity_id"]]
    ]
    table = _table(ENTITIES, rows, canonical_vectors.shape[1])
    lance.write_dataset(table, lance_store.table_path(index_dir, ENTITIES), mode="overwrite")
    return {"entities": len(rows)}


def _table(name: str, rows: list[dict], dim: int | None = None) -> pa.Table:
    schema = schema_for(name, dim)
    if not rows:
        return schema.empty_table()
    return pa.Table.from_pylist(rows, schema=schema)


SEARCH_COLUMNS = {NODES: "text", ENTITIES: "name"}  # the full-text indexed column per table


def build_search_indexes(index_dir: str | Path, vector_index_min_rows: int = 1_000) -> list[str]:
    """LanceDB full-text indexes (node text, entity names) and vector indexes (IVF + HNSW with
    scalar quantisation, cosine) on the ``vector`` columns. A table under
    ``vector_index_min_rows`` rows gets no ANN index: a flat scan is exact and as fast there, and
    IVF needs that many rows to train its partitions. Returns what was built."""
    return [
        name
        for table in SEARCH_COLUMNS
        for name in build_table_search_indexes(index_dir, table, vector_index_min_rows)
    ]


def build_table_search_indexes(
    index_dir: str | Path, table_name: str, vector_index_min_rows: int = 1_000
) -> list[str]:
    """``build_search_indexes`` for one table (``NODES`` or ``ENTITIES``): the job builds the
    nodes' while the corpus resolver runs, the entities' once their table is written. Nothing
    when the table does not exist."""
    import lancedb

    db = lancedb.connect(str(index_dir))
    if table_name not in set(db.list_tables().tables):
        return []
    text_column = SEARCH_COLUMNS[table_name]
    table = db.open_table(table_name)
    with warnings.catch_warnings():  # 0.40 deprecates it; create_index has no FTS column
        warnings.simplefilter("ignore")
        table.create_fts_index(text_column, replace=True)
    built = [f"{table_name}.{text_column}:fts"]
    rows = table.count_rows()
    if rows >= vector_index_min_rows:
        table.create_index(
            metric="cosine",
            vector_column_name="vector",
            index_type="IVF_HNSW_SQ",
            num_partitions=max(1, int(rows**0.5) // 8),
            replace=True,
        )
        built.append(f"{table_name}.vector:ivf_hnsw_sq")
    return built
