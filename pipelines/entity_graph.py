"""Corpus-wide entity resolution in one Ray actor.

``CorpusResolver`` wraps ``operators.graph.entity_sets.CorpusEntities`` (the canonical entities
with their name vectors; plain Python, tested without Ray): it starts from the ``entities``
table, resolves the new documents' entities batch by batch (each against what is already
there; never all pairs), and hands back the entity each one became. So a later run only
resolves the new documents' entities. With a generative model configured, the actor loads it
to choose among several candidates, and the configured reranker (``models.rerank_model``) to
score them (BookRAG Alg. 1), as the enrich stage does within each document. With a generative
model configured, BookRAG's LLM step (which of several selected candidates) is a phase: a first
resolution collects the questions (``SelectionPhase``), one ``ray.data.llm`` processor pass
answers them all (pipelines/er_selection.py), and a second resolution applies the answers —
only when an answer changes a merge (``SelectionPhase.changes``): answers that are the rule's
own choice leave every merge as the first resolution made it, whose decisions are then only
relabelled (``relabel_answered``). The actor itself loads no generative model.

The entity tables are written by ``pipelines.store.entity_tables``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bookindex.operators.config import BookindexConfig, ModelConfig, ResolverConfig
from bookindex.operators.graph.entity_sets import CorpusEntities
from bookindex.operators.graph.resolution import SelectionPhase, relabel_answered
from bookindex.operators.kinds import FAILED
from bookindex.operators.models import load_reranker
from bookindex.pipelines.rows import decode_vectors, from_json
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import ENTITIES


class CorpusResolver:
    """The corpus entity set of an index (a Ray actor). ``resolver``: ``ResolverConfig``
    fields; ``models``: ``ModelConfig.to_dict()``."""

    def __init__(
        self,
        index_dir: str,
        dim: int,
        resolver: dict | None = None,
        models: dict | None = None,
        answers: dict[str, int] | None = None,
    ) -> None:
        """``answers``: the model's selections so far (``SelectionPhase``); None: the rule
        alone (no generative model)."""
        config = ModelConfig(**(models or {}))
        self.phase = SelectionPhase(answers) if answers is not None else None
        rerank = load_reranker(config)  # the per-document resolution's reranker too
        self.entities = CorpusEntities(dim, ResolverConfig(**(resolver or {})), self.phase, rerank)
        self.entities.load(lance_store.read_table(index_dir, ENTITIES).to_pylist())

    def resolve(self, documents: list[dict]) -> list[dict]:
        """``[{doc_id, entities (list), vectors (bytes)}]`` → per document the entity id of each
        entity and the decisions, in the order given (``CorpusEntities.resolve``)."""
        dim = self.entities.dim
        return self.entities.resolve(
            [
                dict(d, vectors=decode_vectors(d["vectors"], len(d["entities"]), dim))
                for d in documents
            ]
        )

    def canonical_rows(self) -> tuple[list[dict], np.ndarray]:
        return self.entities.canonical_rows()

    def asked(self) -> SelectionPhase | None:
        """The selections the rule decided because nobody had answered them yet (``asked``,
        key → (doc_id, messages)), with their candidate counts; None without a model."""
        return self.phase if self.phase is not None and self.phase.asked else None

    def size(self) -> int:
        return len(self.entities)


def resolve_corpus(
    index_dir: str | Path,
    doc_rows: list[dict],
    dim: int,
    config: BookindexConfig,
    batch_entities: int = 2000,
    errors: dict[str, list[str]] | None = None,
) -> tuple[list[dict], list[dict], np.ndarray]:
    """Run corpus resolution in one Ray actor. Documents go in ``uri`` order, in batches of
    about ``batch_entities`` entities. Returns the per-document results and the canonical
    entities (rows, vectors). With a generative model and questions, the model's selections
    (one processor pass) are applied: by a second resolution when one changes a merge, else
    by relabelling the first one's decisions (the same output); selections without a usable
    answer keep the rule and are added to ``errors`` (doc_id → messages)."""
    answers = {} if config.models.generative else None
    results, rows, vectors, asked = _resolve_in_actor(
        index_dir, doc_rows, dim, config, batch_entities, answers
    )
    if asked:
        from bookindex.pipelines.er_selection import ask_selections

        answers, failed = ask_selections(asked.asked, config)
        for doc_id, why in failed:
            (errors if errors is not None else {}).setdefault(doc_id, []).append(why)
        if asked.changes(answers):
            results, rows, vectors, _ = _resolve_in_actor(
                index_dir, doc_rows, dim, config, batch_entities, answers
            )
        else:  # every answer is the rule's choice: the same merges, relabelled
            results = [
                dict(r, decisions=relabel_answered(r["decisions"], answers)) for r in results
            ]
    return results, rows, vectors


def _resolve_in_actor(
    index_dir: str | Path,
    doc_rows: list[dict],
    dim: int,
    config: BookindexConfig,
    batch_entities: int,
    answers: dict[str, int] | None,
) -> tuple[list[dict], list[dict], np.ndarray, dict]:
    """One corpus resolution in a fresh actor (started from the ``entities`` table)."""
    import ray

    actor = (
        ray.remote(CorpusResolver)
        .options(num_cpus=1)
        .remote(str(index_dir), dim, config.resolver.model_dump(), config.models.to_dict(), answers)
    )
    docs = [
        {
            "doc_id": r["doc_id"],
            "entities": from_json(r["entities"]),
            "vectors": r["entity_vectors"],
        }
        for r in sorted(doc_rows, key=lambda r: (r["uri"], r["doc_id"]))
        if r["status"] != FAILED
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
    asked = ray.get(actor.asked.remote())
    ray.kill(actor)
    return results, rows, vectors, asked
