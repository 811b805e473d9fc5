"""The index job's generative batch work on ``ray.data.llm`` (``--models openai`` / ``vllm``).

Between the structure stage and the enrich stage, for every document row:

    documents ─flat_map(section_requests)─▶ one request per window of the LLM section
      refiner's candidates (SECTION_PROMPT, SECTION_SCHEMA; planned by the structure stage,
      independent of each other) ─processor─▶ answers ─attach─▶
      ─map_batches(structure_stage.apply_section_answers)─▶ trees rebuilt with the model's
      decisions, ``section_decisions`` (a window without a usable answer: the rules stand, and
      its error becomes a ``failures`` row, stage ``sections``)
    documents ─flat_map(description_requests)─▶ one request per figure and table (the page crop
      as a PNG image part, TABLE_PROMPT / IMAGE_PROMPT and the caption; the first
      ``index.max_described_per_document`` of a document, the rest a ``failures`` row)
      ─processor (llm_processors)─▶ answers ─attach─▶ node summaries
    documents ─flat_map(entity_requests)─▶ one request per text node (ENTITY_PROMPT, ENTITY_SCHEMA)
      ─processor; invalid JSON: repaired, then asked again with the invalid answer
      (``models.max_retries`` times)─▶ answers ─attach─▶ ``llm_entities``

Each pass is a Ray Data execution that starts its processor's workers, and a retry another; the
passes are sequential (each task's requests come from the rows the previous one changed).
``attach`` brings a pass's answers to the documents by a map that carries them (they are small:
an answer per request), fused with the map that applies them; only an answer set over
``BROADCAST_BYTES`` goes through a hash join.

``EnrichStage`` then reads the answers from the row (``answers=True``): a node whose answer
stayed unusable keeps the rule-based (spaCy) entities, and its error becomes a ``failures`` row
(stage ``enrich``). The driver only plans: every request runs in the processors' workers.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pyarrow as pa

from bookindex.operators.config import BookindexConfig
from bookindex.operators.graph.entities import node_text
from bookindex.operators.kinds import FAILED, IMAGE, TABLE
from bookindex.operators.models import entity_messages
from bookindex.operators.models.base import image_message
from bookindex.operators.models.prompts import (
    ENTITY_SCHEMA,
    IMAGE_PROMPT,
    SECTION_SCHEMA,
    SELECT_SCHEMA,
    TABLE_PROMPT,
)
from bookindex.operators.models.structured import retry_conversation
from bookindex.pipelines.llm_processors import (
    answer_attempts,
    asks_again_itself,
    build_ray_processor,
)
from bookindex.pipelines.rows import from_json, to_json
from bookindex.pipelines.structure_stage import apply_section_answers

log = logging.getLogger(__name__)
MAX_DESCRIBED_PER_DOCUMENT = 200  # IndexConfig.max_described_per_document's default
IMAGE_DPI = 150
SECTIONS, DESCRIPTIONS, ENTITIES = "section_answers", "descriptions", "llm_entities"
SELECTIONS = "selections"  # pipelines/er_selection.py
SCHEMAS = {
    SECTIONS: SECTION_SCHEMA,
    DESCRIPTIONS: None,
    ENTITIES: ENTITY_SCHEMA,
    SELECTIONS: SELECT_SCHEMA,
}
REQUESTS_PER_BATCH = 16
# An answer set up to this many bytes reaches its documents by a map that carries it
# (``attach``), not by a hash join: Ray 2.60's join starts aggregator actors each time (22-25 s
# of the test job's 76-134 s on a loaded 2-CPU node, for a few kB of answers).
BROADCAST_BYTES = 64 * 1024 * 1024


def described_nodes(row: dict) -> list[dict]:
    """The figures and tables of a PDF document row that the model may describe."""
    if row["status"] == FAILED or row.get("source") != "pdf":
        return []
    return [n for n in from_json(row["nodes"], []) if n["kind"] in (IMAGE, TABLE)]


def description_requests(row: dict, limit: int = MAX_DESCRIBED_PER_DOCUMENT) -> list[dict]:
    """One request per figure and table of a PDF document (the first ``limit``, in page
    order; ``truncation_error`` says what was left out): its crop of the page as the image."""
    nodes = described_nodes(row)[:limit]
    if not nodes:
        return []
    import pymupdf

    requests = []
    with pymupdf.open(row["uri"], filetype="pdf") as pdf:
        for node in nodes:
            page = pdf[node["page_start"] - 1]
            clip = pymupdf.Rect(node["bbox"]) & page.rect
            pixmap = page.get_pixmap(dpi=IMAGE_DPI, clip=clip if not clip.is_empty else None)
            prompt = TABLE_PROMPT if node["kind"] == TABLE else IMAGE_PROMPT
            if node.get("title"):
                prompt += f" Its caption: {node['title']}"
            message = image_message(prompt, pixmap.tobytes("png"))
            requests.append(_request(row, node, [message]))
    return requests


def entity_requests(row: dict) -> list[dict]:
    """One entity-extraction request per node with text (a figure's text: its description)."""
    if row["status"] == FAILED:
        return []
    return [
        _request(row, node, entity_messages(node_text(node)))
        for node in from_json(row["nodes"], [])
        if node_text(node).strip()
    ]


def section_requests(row: dict) -> list[dict]:
    """One request per window of the LLM section refiner (``section_review``: planned by the
    structure stage; the windows are independent, so all of a corpus's go at once)."""
    review = from_json(row.get("section_review"), None)
    if row["status"] == FAILED or not review:
        return []
    return [
        {"doc_id": row["doc_id"], "node_id": str(w["number"]), "request": json.dumps(w["messages"])}
        for w in review["windows"]
    ]


def _request(row: dict, node: dict, messages: list[dict]) -> dict:
    return {"doc_id": row["doc_id"], "node_id": node["node_id"], "request": json.dumps(messages)}


def run_requests(dataset, config: BookindexConfig, task: str):
    """Request rows → answer rows (``doc_id``, ``node_id``, ``answer``, ``answer_error``,
    ``attempts``), materialized. Entity answers that are not valid JSON are asked again, with
    the invalid answer shown, at most ``models.max_retries`` times; then their error stays.
    With openai the processor's session asks again within the one pass
    (``llm_processors.EndpointSession``); with vLLM each retry is a pass of its own here."""
    schema = SCHEMAS[task]
    attempts = 1 if asks_again_itself(config) else answer_attempts(config, schema)
    # the first attempt's column is set by a map that fuses with the processor's preprocess
    pending = dataset.map(_with_attempt, fn_kwargs={"attempt": 1})
    requests = dataset.count()
    finished = []
    for attempt in range(1, attempts + 1):
        if requests == 0:
            break
        processor = build_ray_processor(
            config,
            schema,
            vision=task == DESCRIPTIONS,
            batch_size=REQUESTS_PER_BATCH,
            requests=requests,
        )
        answered = processor(pending).materialize()
        retry = answered.filter(_retryable) if attempt < attempts else None
        finished.append(answered.filter(_final) if retry is not None else answered)
        if retry is None:
            break
        pending = retry.map(_asked_again, fn_kwargs={"attempt": attempt + 1}).materialize()
        requests = pending.count()
    columns = ["doc_id", "node_id", "answer", "answer_error", "attempts"]
    finished = [part.select_columns(columns) for part in finished]
    out = finished[0] if len(finished) == 1 else finished[0].union(*finished[1:])
    return out.materialize()


def _with_attempt(row: dict, attempt: int) -> dict:
    return {**row, "attempts": attempt}


def _retryable(row: dict) -> bool:
    return bool(row["answer_error"]) and bool(row.get("invalid_answer"))


def _final(row: dict) -> bool:
    return not _retryable(row)


def _asked_again(row: dict, attempt: int) -> dict:
    messages = retry_conversation(
        json.loads(row["request"]), row["invalid_answer"], row["answer_error"]
    )
    return {
        "doc_id": row["doc_id"],
        "node_id": row["node_id"],
        "request": json.dumps(messages),
        "attempts": attempt,
    }


def attach(documents, answers, column: str, partitions: int, broadcast_bytes: int | None = None):
    """The document rows with ``column``: JSON ``{node_id: [answer, error, attempts]}`` of
    their answers (null for a document that had no request).

    An answer set of at most ``broadcast_bytes`` (``BROADCAST_BYTES`` when None; Arrow bytes,
    as materialized: an answer per request, small beside the documents) is collected on the
    driver, grouped by document and given to a map over the documents (``with_answers``): no
    shuffle, no aggregator actors, and the map fuses with the one that applies the answers. A
    larger one is joined: both inputs of each hash shuffle are cut to their blocks with rows
    first (``rows_only``)."""
    limit = BROADCAST_BYTES if broadcast_bytes is None else broadcast_bytes
    answers = answers.materialize()
    if answers.size_bytes() <= limit:
        return with_answers(documents, answers_by_document(answers), column)
    documents, answers = rows_only(documents), rows_only(answers)
    if answers is None:
        return documents.map_batches(
            _null_column, batch_format="pyarrow", fn_kwargs={"column": column}
        )
    grouped = answers.groupby("doc_id").map_groups(
        _collect, batch_format="pyarrow", fn_kwargs={"column": column}
    )
    return documents.join(
        rows_only(grouped), "left_outer", num_partitions=partitions, on=("doc_id",)
    )


def answers_by_document(answers) -> dict[str, dict[str, list]]:
    """Answer rows (a materialized dataset) as ``{doc_id: {node_id: [answer, error,
    attempts]}}``, in their order."""
    by_doc: dict[str, dict[str, list]] = {}
    for r in answers.iter_rows():
        by_doc.setdefault(r["doc_id"], {})[r["node_id"]] = [
            r["answer"],
            r["answer_error"],
            r["attempts"],
        ]
    return by_doc


def with_answers(documents, by_doc: dict[str, dict[str, list]], column: str):
    """``documents`` with ``column``: each one's answers in ``by_doc`` as JSON (null: none),
    by a map over the documents that carries ``by_doc`` (one object, put in the object store
    once for the map's tasks)."""
    return documents.map_batches(
        _answers_column, batch_format="pyarrow", fn_kwargs={"column": column, "by_doc": by_doc}
    )


def _answers_column(batch: pa.Table, column: str, by_doc: dict[str, dict[str, list]]) -> pa.Table:
    if "doc_id" not in batch.column_names:  # a block without rows (a flat_map's empty one)
        return batch
    found = [by_doc.get(d) for d in batch.column("doc_id").to_pylist()]
    values = [to_json(a) if a is not None else None for a in found]
    return batch.append_column(column, pa.array(values, pa.string()))


def rows_only(dataset):
    """``dataset`` materialized and cut to its blocks that hold rows (None: it has none),
    before a hash shuffle (a join, a hash-shuffle groupby).

    Ray 2.60's hash shuffle sends the schema of each input's *first* block to every
    partition; a zero-row block without columns — what ``Dataset.filter`` with a function
    and ``flat_map`` leave of a block without output (``run_requests`` filters the
    processor's rows; a block of documents without requests has none) — sends none, and each
    partition that then gets no row of that input has a table without the key column:
    polars ``ColumnNotFoundError: doc_id; valid columns: []``
    (tests/integration/test_answer_joins.py). The blocks are chosen by their metadata, not
    by a map (a map fused with the filter that emptied them passes them on)."""
    import ray

    materialized = dataset.materialize()
    bundles = list(materialized.iter_internal_ref_bundles())
    if any(s is not None for b in bundles for s in b.slices):  # views of blocks: keep as is
        return materialized
    kept = [e.ref for b in bundles for e in b.blocks if e.metadata.num_rows != 0]
    return ray.data.from_arrow_refs(kept) if kept else None


def _null_column(batch: pa.Table, column: str) -> pa.Table:
    return batch.append_column(column, pa.array([None] * batch.num_rows, pa.string()))


def _collect(batch: pa.Table, column: str) -> pa.Table:
    rows = batch.to_pylist()
    by_node = {r["node_id"]: [r["answer"], r["answer_error"], r["attempts"]] for r in rows}
    return pa.Table.from_pylist([{"doc_id": rows[0]["doc_id"], column: to_json(by_node)}])


def truncation_error(row: dict, limit: int) -> str | None:
    """The ``model_errors`` entry of a document with more figures and tables than ``limit``
    (None: every one was asked for)."""
    total = len(described_nodes(row))
    if total <= limit:
        return None
    log.warning("%s: %d of %d figures and tables described", row.get("uri"), limit, total)
    return (
        f"describe: {total - limit} of {total} figures and tables not described "
        f"(index.max_described_per_document = {limit}); they keep their captions"
    )


def apply_descriptions(batch: pa.Table, limit: int = MAX_DESCRIBED_PER_DOCUMENT) -> pa.Table:
    """Each figure's and table's description into its node's ``summary``; the requests that
    failed, and a document's figures and tables beyond ``limit`` (``truncation_error``), into
    ``model_errors`` (JSON list, read by ``EnrichStage``: each becomes a failures row)."""
    out = []
    for row in batch.to_pylist():
        answers: dict[str, Any] = from_json(row.pop(DESCRIPTIONS, None), {}) or {}
        errors = from_json(row.get("model_errors"), []) or []
        truncated = truncation_error(row, limit)
        if truncated:
            errors.append(truncated)
        if answers:
            nodes = from_json(row["nodes"], [])
            for node in nodes:
                answer, error, attempts = answers.get(node["node_id"], ("", "", 0))
                if answer:
                    node["summary"] = answer
                elif error:
                    errors.append(f"{node['node_id']}: describe: {error} ({attempts} attempt(s))")
            row["nodes"] = to_json(nodes)
        row["model_errors"] = to_json(errors)
        out.append(row)
    return pa.Table.from_pylist(out)


def model_answers(documents, config: BookindexConfig, partitions: int, enrich: bool = True):
    """``documents`` with the section refiner's decisions applied (their trees rebuilt), and,
    with ``enrich``, their figure and table descriptions in the nodes and the LLM's entity
    answers in ``llm_entities`` (pipelines/enrich_worker.py reads them)."""
    documents = documents.materialize()  # read twice below: the structure stage runs once
    requests = documents.flat_map(section_requests).materialize()
    if requests.count():
        answers = run_requests(requests, config, SECTIONS)
        documents = attach(documents, answers, SECTIONS, partitions)
    index = config.index
    documents = documents.map_batches(
        apply_section_answers,
        batch_format="pyarrow",
        fn_kwargs={
            "use_outline": index.use_outline,
            "section_filter": index.section_filter,
            "window": index.section_window,
        },
    ).materialize()
    if not enrich:
        return documents
    limit = {"limit": index.max_described_per_document}
    requests = documents.flat_map(description_requests, fn_kwargs=limit).materialize()
    if requests.count():
        answers = run_requests(requests, config, DESCRIPTIONS)
        documents = attach(documents, answers, DESCRIPTIONS, partitions)
    documents = documents.map_batches(
        apply_descriptions, batch_format="pyarrow", fn_kwargs=limit
    ).materialize()
    requests = documents.flat_map(entity_requests).materialize()
    if requests.count():
        answers = run_requests(requests, config, ENTITIES)
        documents = attach(documents, answers, ENTITIES, partitions)
    else:
        documents = documents.map_batches(
            _null_column, batch_format="pyarrow", fn_kwargs={"column": ENTITIES}
        )
    return documents.materialize()
