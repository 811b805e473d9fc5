"""Corpus-wide entity resolution and the entity tables.

One Ray actor (``CorpusResolver``) holds the canonical entity vectors: it starts from the
``entities`` table, resolves the new documents' entities batch by batch (each against what is
already there; never all pairs), and hands back the entity each one became. So a later run only
resolves the new documents' entities.

Tables written here: ``mentions`` (entity → node links), ``relations``, ``er_decisions``
(appended per document; a re-indexed document's rows are replaced) and ``entities`` (rewritten
as a whole, atomically, with mention counts; entities no document mentions any more drop out).
Tables, figures and formulas are entities of one document: they keep a document-local id and
never enter corpus resolution.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import lance
import numpy as np
import pyarrow as pa

from operators.entities import STRUCTURAL_TYPES, structural_entity_id
from operators.models import ModelConfig, load_backend
from operators.resolution import Canonical, Resolver, model_selector
from pipelines import lance_store
from pipelines.schemas import (
    EMBED_DIM,
    ENTITIES,
    ER_DECISIONS,
    MENTIONS,
    NODES,
    RELATIONS,
    SCHEMAS,
)

_DECISION_KEYS = (
    "new_name",
    "new_type",
    "candidates",
    "candidate_ids",
    "scores",
    "selected",
    "action",
    "reason",
    "entity_id",
)


class CorpusResolver:
    """The corpus entity set: canonical entities with their name vectors (a Ray actor)."""

    def __init__(
        self,
        index_dir: str,
        dim: int,
        resolver_options: dict | None = None,
        model_config: dict | None = None,
    ) -> None:
        self.dim = dim
        select = None
        config = ModelConfig(**model_config) if model_config else None
        if config is not None and config.generative:
            select = model_selector(load_backend(config))
        self.resolver = Resolver(dim=dim, select=select, **(resolver_options or {}))
        stored = lance_store.read_table(index_dir, ENTITIES).to_pylist()
        corpus = [r for r in stored if not r["doc_id"]]
        if corpus:
            self.resolver.load(
                [
                    Canonical(
                        r["entity_id"],
                        r["name"],
                        r["type"],
                        r["description"],
                        list(r["aliases"] or []),
                    )
                    for r in corpus
                ],
                np.asarray([r["vector"] for r in corpus], np.float32),
            )

    def resolve(self, documents: list[dict]) -> list[dict]:
        """``[{doc_id, entities (list), vectors (bytes)}]`` → per document the entity id of each
        entity and the decisions, in the order given."""
        results = []
        for doc in documents:
            entities = doc["entities"]
            vectors = np.frombuffer(doc["vectors"], np.float32).reshape(len(entities), self.dim)
            ids = [""] * len(entities)
            rows = [i for i, e in enumerate(entities) if e["type"] not in STRUCTURAL_TYPES]
            positions, decisions = self.resolver.resolve(
                [entities[i]["name"] for i in rows],
                [entities[i]["type"] for i in rows],
                [entities[i]["description"] for i in rows],
                vectors[rows],
            )
            for i, position in zip(rows, positions, strict=True):
                ids[i] = self.resolver.entities[position].entity_id
                # names the document merged into this entity: aliases, and in the name lookup
                # so that a later document using one of them merges at once
                for alias in entities[i]["aliases"]:
                    self.resolver.add_alias(position, alias)
            for i, entity in enumerate(entities):
                if entity["type"] in STRUCTURAL_TYPES:
                    node_id = entity["node_ids"][0]
                    ids[i] = structural_entity_id(doc["doc_id"], node_id, entity["type"])
            results.append(
                {
                    "doc_id": doc["doc_id"],
                    "entity_ids": ids,
                    "decisions": [{k: getattr(d, k) for k in _DECISION_KEYS} for d in decisions],
                }
            )
        return results

    def canonical_rows(self) -> tuple[list[dict], np.ndarray]:
        rows = [
            {
                "entity_id": e.entity_id,
                "name": e.name,
                "type": e.type,
                "description": e.description,
                "aliases": list(e.aliases),
            }
            for e in self.resolver.entities
        ]
        return rows, self.resolver.index.vectors.copy()

    def size(self) -> int:
        return len(self.resolver)


def resolve_corpus(
    index_dir: str | Path,
    doc_rows: list[dict],
    dim: int,
    batch_entities: int = 2000,
    resolver_options: dict | None = None,
    model_config: dict | None = None,
) -> tuple[list[dict], list[dict], np.ndarray]:
    """Run corpus resolution in one Ray actor. Documents go in ``uri`` order, in batches of
    about ``batch_entities`` entities. Returns the per-document results and the canonical
    entities (rows, vectors)."""
    import ray

    actor = (
        ray.remote(CorpusResolver).options(num_cpus=1).remote(str(index_dir), dim, resolver_options)
    )
    docs = [
        {
            "doc_id": r["doc_id"],
            "entities": json.loads(r["entities"]),
            "vectors": r["entity_vectors"],
        }
        for r in sorted(doc_rows, key=lambda r: (r["uri"], r["doc_id"]))
        if r["status"] != "failed"
    ]
    batches: list[list[dict]] = [[]]
    size = 0
    for doc in docs:
        if size >= batch_entities:
            batches.append([])
            size = 0
        batches[-1].append(doc)
        size += len(doc["entities"])
    results: list[dict] = []
    for batch in batches:
        if batch:
            results += ray.get(actor.resolve.remote(batch))
    rows, vectors = ray.get(actor.canonical_rows.remote())
    ray.kill(actor)
    return results, rows, vectors


def write_entity_tables(
    index_dir: str | Path,
    doc_rows: list[dict],
    results: list[dict],
    canonical: list[dict],
    canonical_vectors: np.ndarray,
) -> dict[str, int]:
    """Append mentions, relations and decisions of the new documents; rewrite ``entities``."""
    now = datetime.now(UTC)
    by_doc = {r["doc_id"]: r for r in doc_rows}
    mentions, relations, decisions = [], [], []
    structural: dict[str, dict] = {}
    for result in results:
        doc = by_doc[result["doc_id"]]
        doc_id, ids = doc["doc_id"], result["entity_ids"]
        entities = json.loads(doc["entities"])
        vectors = np.frombuffer(doc["entity_vectors"], np.float32).reshape(len(entities), EMBED_DIM)
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
        for r in json.loads(doc["relations"]):
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
            ("document", json.loads(doc["er_decisions"])),
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
    table = _table(ENTITIES, rows)
    lance.write_dataset(table, lance_store.table_path(index_dir, ENTITIES), mode="overwrite")
    return {"entities": len(rows)}


def _table(name: str, rows: list[dict]) -> pa.Table:
    schema = SCHEMAS[name]
    if not rows:
        return schema.empty_table()
    return pa.Table.from_pylist(rows, schema=schema)


def build_search_indexes(index_dir: str | Path, vector_index_min_rows: int = 1_000) -> list[str]:
    """LanceDB full-text indexes (node text, entity names) and vector indexes (IVF + HNSW with
    scalar quantisation, cosine) on the ``vector`` columns. A table under
    ``vector_index_min_rows`` rows gets no ANN index: a flat scan is exact and as fast there, and
    IVF needs that many rows to train its partitions. Returns what was built."""
    import lancedb

    db = lancedb.connect(str(index_dir))
    built = []
    names = set(db.list_tables().tables)
    for table_name, text_column in ((NODES, "text"), (ENTITIES, "name")):
        if table_name not in names:
            continue
        table = db.open_table(table_name)
        with warnings.catch_warnings():  # 0.40 deprecates it; create_index has no FTS column
            warnings.simplefilter("ignore")
            table.create_fts_index(text_column, replace=True)
        built.append(f"{table_name}.{text_column}:fts")
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
