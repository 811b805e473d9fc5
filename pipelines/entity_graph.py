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
from pathlib import Path

import numpy as np

from operators.graph.entities import STRUCTURAL_TYPES, structural_entity_id
from operators.graph.resolution import Canonical, Resolver, model_selector
from operators.models import ModelConfig, load_backend
from pipelines.store import lance_store
from pipelines.store.schemas import (
    ENTITIES,
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
