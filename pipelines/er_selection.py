"""BookRAG's LLM step of entity resolution (which of several selected candidates a new entity
is, Algorithm 1) as a phase on ``ray.data.llm`` (``--models openai`` / ``vllm``).

The resolver never calls a model itself. Within a document, ``EnrichStage`` resolves with a
``SelectionPhase`` (operators/graph/resolution.py): where the gradient rule leaves several
candidates, the best-scoring one stands and the question is recorded in the row
(``er_requests``, with what a second resolution needs: ``er_extraction``, ``er_name_vectors``).
Then, for all documents at once:

    documents ─flat_map(selection_requests)─▶ one request per question (SELECT_PROMPT,
      SELECT_SCHEMA) ─processor (llm_processors; invalid JSON repaired, asked again
      ``models.max_retries`` times)─▶ answers (small: to the driver, then to the actor)
      ─map_batches(ApplySelections)─▶ the document's resolution run again with the answers:
      its entity columns replaced; questions without a usable answer keep the rule, and their
      errors become ``failures`` rows (stage ``enrich``)

Across the corpus, ``pipelines.entity_graph.resolve_corpus`` does the same with the corpus
resolver's questions (``ask_selections``). The merges are applied by the resolver in its own
order (documents by uri, entities in extraction order), so the same input and answers make the
same index. A question that first arises in the second resolution (an earlier answer changed
the candidates) keeps the rule.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pyarrow as pa

from bookindex.operators.config import BookindexConfig, ModelConfig, ResolverConfig
from bookindex.operators.graph.entities import LocalEntity, LocalRelation, NodeExtraction
from bookindex.operators.graph.entity_sets import DocumentEntities, resolve_document
from bookindex.operators.graph.resolution import SelectionPhase
from bookindex.operators.models import load_reranker
from bookindex.pipelines.model_stage import actor_pool, bounded_retries
from bookindex.pipelines.rows import decode_vectors, encode_vectors, from_json, to_json

STASH = ("er_requests", "er_extraction", "er_name_vectors")


def stash_columns(phase: SelectionPhase | None, extraction: NodeExtraction, vectors: Any) -> dict:
    """The columns a document row keeps for the second resolution: its questions and, when it
    has any, its extraction and name vectors ("" otherwise)."""
    if phase is None or not phase.asked:
        return {"er_requests": "", "er_extraction": "", "er_name_vectors": b""}
    return {
        "er_requests": to_json([[key, messages] for key, (_, messages) in phase.asked.items()]),
        "er_extraction": to_json(
            {
                "entities": [asdict(e) for e in extraction.entities],
                "relations": [asdict(r) for r in extraction.relations],
            }
        ),
        "er_name_vectors": encode_vectors(vectors),
    }


def entity_columns(found: DocumentEntities, name_vectors: Any) -> dict:
    """A document's resolution as its row's entity columns."""
    kept = name_vectors[found.vector_rows] if found.entities else name_vectors[:0]
    return {
        "entities": to_json(found.entities),
        "entity_vectors": encode_vectors(kept),
        "relations": to_json(found.relations),
        # vars, not asdict: a Decision holds plain values and lists of them (asdict's deep
        # copy was 6 % of the enrich stage's CPU)
        "er_decisions": to_json([vars(d) for d in found.decisions]),
    }


def selection_requests(row: dict) -> list[dict]:
    """One request per question the document's resolution left to the model."""
    return [
        {"doc_id": row["doc_id"], "node_id": key, "request": json.dumps(messages)}
        for key, messages in from_json(row.get("er_requests"), []) or []
    ]


def parse_choice(answer: str) -> int | None:
    """The model's choice in a checked SELECT_SCHEMA answer (None: not an integer)."""
    try:
        choice = json.loads(answer)["choice"]
    except (ValueError, KeyError, TypeError):
        return None
    return choice if isinstance(choice, int) and not isinstance(choice, bool) else None


def _choices(answers: dict, asked: list[str]) -> tuple[dict[str, int], list[str]]:
    """(key → choice) of the usable answers, and the errors of the others."""
    choices, errors = {}, []
    for key in asked:
        answer, error, attempts = answers.get(key, ("", "no answer", 0))
        choice = parse_choice(answer) if answer else None
        if choice is None:
            name = key.split("|", 1)[0]
            why = error or "no integer choice in the answer"
            errors.append(f"ER selection for {name!r}: {why} ({attempts} attempt(s))")
        else:
            choices[key] = choice
    return choices, errors


class ApplySelections:
    """Document rows → their resolution run again with the model's selections (a Ray Data UDF
    class: it loads the configured reranker, if any, once)."""

    def __init__(self, models: dict, resolver: dict, answers: dict[str, dict]) -> None:
        self.rerank = load_reranker(ModelConfig(**models))
        self.resolver = ResolverConfig(**resolver)
        self.answers = answers  # doc_id → {question key: [answer, error, attempts]}

    def __call__(self, batch: pa.Table) -> pa.Table:
        out = []
        for row in batch.to_pylist():
            asked = [key for key, _ in from_json(row.get("er_requests"), []) or []]
            answers = self.answers.get(row["doc_id"], {})
            extraction = from_json(row.get("er_extraction"), None)
            raw = row.get("er_name_vectors")
            for column in STASH:
                row.pop(column, None)
            if asked and extraction is not None:
                choices, errors = _choices(answers, asked)
                entities = [LocalEntity(**e) for e in extraction["entities"]]
                relations = [LocalRelation(**r) for r in extraction["relations"]]
                vectors = decode_vectors(raw, len(entities), row["vector_width"])
                found = resolve_document(
                    row["doc_id"],
                    NodeExtraction(entities, relations),
                    vectors,
                    self.resolver,
                    SelectionPhase(choices),
                    self.rerank,
                )
                row.update(entity_columns(found, vectors))
                row["enrich_errors"] = to_json(from_json(row["enrich_errors"], []) + errors)
            out.append(row)
        return pa.Table.from_pylist(out)


def document_selections(documents, config: BookindexConfig):
    """The enriched documents with the model's selections applied within each document. The
    answers are small (a choice per question): they reach the ``ApplySelections`` actor as
    one object, not through a join."""
    documents = documents.materialize()
    requests = documents.flat_map(selection_requests).materialize()
    by_doc: dict[str, dict[str, list]] = {}
    if requests.count():
        for r in _requests(requests, config).take_all():
            by_doc.setdefault(r["doc_id"], {})[r["node_id"]] = [
                r["answer"],
                r["answer_error"],
                r["attempts"],
            ]
    return documents.map_batches(
        ApplySelections,
        fn_constructor_kwargs={
            "models": config.models.to_dict(),
            "resolver": config.resolver.model_dump(),
            "answers": by_doc,
        },
        compute=actor_pool(1),  # a second resolution per document: light, CPU
        batch_format="pyarrow",
        **bounded_retries(config, actors=True),
    )


def ask_selections(
    asked: dict[str, tuple[str, list[dict]]], config: BookindexConfig
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The corpus resolver's questions (key → (doc_id, messages)) answered in one processor
    pass: (key → choice, [(doc_id, error)] for those without a usable answer)."""
    import ray

    keys = sorted(asked)
    rows = [{"doc_id": asked[k][0], "node_id": k, "request": json.dumps(asked[k][1])} for k in keys]
    dataset = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows) // 16, 64)))
    answered = _requests(dataset, config).take_all()
    answers = {r["node_id"]: (r["answer"], r["answer_error"], r["attempts"]) for r in answered}
    choices: dict[str, int] = {}
    failed: list[tuple[str, str]] = []
    for key in keys:
        found, errors = _choices(answers, [key])
        choices.update(found)
        failed += [(asked[key][0], e) for e in errors]
    return choices, failed


def _requests(dataset, config: BookindexConfig):
    """``model_requests.run_requests`` for the selections, imported here: the enrich stage's
    model process imports this module for its columns, and model_requests imports the
    structure stage (PyMuPDF, the section model): seconds of every worker's start-up."""
    from bookindex.pipelines.model_requests import SELECTIONS, run_requests

    return run_requests(dataset, config, SELECTIONS)
