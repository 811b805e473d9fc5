"""Entity resolution applied, in its two scopes (plain Python: the index job's enrich stage and
corpus-resolver actor wrap these, benchmarks and tests call them directly):

- ``resolve_document``: one document's extracted entities merged within the document (a fresh
  ``Resolver`` salted with the document id), relations re-pointed to the merged entities;
- ``CorpusEntities``: the corpus's canonical entity set, started from the stored ``entities``
  rows; resolves documents' merged entities against it, batch by batch (each against what is
  already there, never all pairs).

Tables, figures and formulas (``STRUCTURAL_TYPES``) are one object of one document: they take
part in neither resolution and keep a document-local id. One ``ResolverConfig`` reaches both.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from bookindex.operators.config import ResolverConfig
from bookindex.operators.graph.entities import (
    STRUCTURAL_TYPES,
    NodeExtraction,
    structural_entity_id,
)
from bookindex.operators.graph.resolution import (
    Canonical,
    Decision,
    Reranker,
    Resolver,
    SelectionPhase,
    Selector,
)

# the keys of a decision as the corpus resolver hands it back (a row of ``er_decisions``)
DECISION_KEYS = tuple(Decision.__dataclass_fields__)


@dataclass
class DocumentEntities:
    """A document's entities after resolution within it."""

    entities: list[dict] = field(default_factory=list)  # name, type, description, aliases,
    # node_ids, structural_key
    vector_rows: list[int] = field(default_factory=list)  # each one's row in the name vectors
    relations: list[dict] = field(default_factory=list)  # source/target: indices of entities
    decisions: list[Decision] = field(default_factory=list)


def resolve_document(
    doc_id: str,
    extraction: NodeExtraction,
    name_vectors: np.ndarray,
    config: ResolverConfig | None = None,
    select: Selector | None = None,
    rerank: Reranker | None = None,
) -> DocumentEntities:
    """Resolution within one document: its entities merged (a merged entity keeps the first
    one's name, description and name vector; the others' names become aliases), relations
    re-pointed, self-relations dropped. ``name_vectors``: one row per extracted entity;
    ``rerank``/``select``: the model steps (``Resolver``), None for the rules alone."""
    local = extraction.entities
    if not local:
        return DocumentEntities()
    resolvable = [i for i, e in enumerate(local) if e.type not in STRUCTURAL_TYPES]
    resolver = Resolver(name_vectors.shape[1], config, rerank=rerank, select=select, id_salt=doc_id)
    found, decisions = resolver.resolve(
        [local[i].name for i in resolvable],
        [local[i].type for i in resolvable],
        [local[i].description for i in resolvable],
        name_vectors[resolvable],
    )
    group_of = {i: ("e", p) for i, p in zip(resolvable, found, strict=True)}
    positions = [group_of.get(i, ("s", i)) for i in range(len(local))]
    merged = DocumentEntities(decisions=decisions)
    slot_of: dict[tuple, int] = {}
    for i, position in enumerate(positions):
        entity = local[i]
        if position not in slot_of:
            slot_of[position] = len(merged.entities)
            merged.vector_rows.append(i)
            merged.entities.append(
                {
                    "name": entity.name,
                    "type": entity.type,
                    "description": entity.description,
                    "aliases": [],
                    "node_ids": list(entity.node_ids),
                    "structural_key": entity.structural_key,
                }
            )
            continue
        target = merged.entities[slot_of[position]]
        if entity.name != target["name"] and entity.name not in target["aliases"]:
            target["aliases"].append(entity.name)
        target["node_ids"] += [n for n in entity.node_ids if n not in target["node_ids"]]
    for r in extraction.relations:
        src, dst = slot_of[positions[r.source]], slot_of[positions[r.target]]
        if src != dst:
            merged.relations.append(dict(vars(r), source=src, target=dst))  # plain values
    return merged


class CorpusEntities:
    """The corpus's canonical entities with their name vectors (``Resolver`` state)."""

    def __init__(
        self,
        dim: int,
        config: ResolverConfig | None = None,
        select: Selector | None = None,
        rerank: Reranker | None = None,
    ) -> None:
        self.dim = dim
        self.resolver = Resolver(dim, config, rerank=rerank, select=select)

    def __len__(self) -> int:
        return len(self.resolver)

    def load(self, stored: list[dict]) -> None:
        """Start from the stored ``entities`` rows (the corpus ones: those without a doc_id)."""
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
        """``[{doc_id, entities (merged, as ``DocumentEntities.entities``), vectors (one row
        each)}]`` → per document the entity id of each entity and the decisions (dicts of
        ``DECISION_KEYS``), in the order given."""
        return [self._resolve_one(doc) for doc in documents]

    def _resolve_one(self, doc: dict) -> dict:
        if isinstance(self.resolver.select, SelectionPhase):  # who asks the question
            self.resolver.select.scope = doc["doc_id"]
        entities = doc["entities"]
        vectors = np.asarray(doc["vectors"], np.float32).reshape(len(entities), self.dim)
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
            # names the document merged into this entity: aliases, and in the name lookup so
            # that a later document using one of them merges at once
            for alias in entities[i]["aliases"]:
                self.resolver.add_alias(position, alias)
        for i, entity in enumerate(entities):
            if entity["type"] in STRUCTURAL_TYPES:
                node_id = entity["node_ids"][0]
                ids[i] = structural_entity_id(doc["doc_id"], node_id, entity["type"])
        return {
            "doc_id": doc["doc_id"],
            "entity_ids": ids,
            "decisions": [{k: getattr(d, k) for k in DECISION_KEYS} for d in decisions],
        }

    def canonical_rows(self) -> tuple[list[dict], np.ndarray]:
        """The canonical entities (entity_id, name, type, description, aliases) and vectors."""
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
