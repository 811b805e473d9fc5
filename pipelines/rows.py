"""The rows that travel between the index job's stages, written down once.

Ray Data moves Arrow tables between stages, and every batch of a stage must have the same Arrow
schema whatever its documents hold: so nested values travel as JSON strings and vectors as raw
float32 bytes. Each field below says what it holds; ``to_json`` / ``from_json`` and
``encode_vectors`` / ``decode_vectors`` are the only encoders the stages use.

    probe rows ─parse─▶ page-range rows ─assemble─▶ document rows ─enrich─▶ enriched rows
    (PROBE_FIELDS)      (+ PARSE_FIELDS)            (DOCUMENT_FIELDS)       (+ ENRICH_FIELDS)

The driver takes the document rows without their ``HEAVY`` columns, which Ray writes to the
``nodes`` table (``pipelines.store.document_writes.node_rows``). This module imports no other module of
``pipelines``: the stages and ``store`` read the rows through it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from bookindex.operators.graph.layout_graph import graph_columns
from bookindex.operators.kinds import OK

if TYPE_CHECKING:  # the structure package imports PyMuPDF: not in a model process
    from bookindex.operators.structure.passages import Passage

# A probed document (pipelines.structure_stage.probe_document), one row per page range to parse.
PROBE_FIELDS = {
    "doc_id": "sha256 of the file's bytes",
    "uri": "the file",
    "size": "bytes",
    "meta": "JSON: operators.parsing.parse.document_metadata (title, outline, page labels)",
    "start": "first page of the range (0-based)",
    "stop": "page after the range",
    "n_pages": "pages of the document",
    "status": "bookindex.operators.kinds.DOCUMENT_STATUSES",
    "error": "why it failed, or needs OCR",
    "warning": "a problem that did not stop it",
    "failure_stage": "open / assemble / layout_graph, when it failed",
    "traceback": "the tail of the failure's traceback",
    "ocr_pages": "JSON list: 1-based pages without a text layer (operators.parsing.ocr)",
    "probe_s": "seconds of the probe",
    "probe_mb": "peak memory of the probing process",
}
# Added by parse_range (books split into page ranges) and by the OCR stage (one page a row,
# pipelines/ocr_stage.py); ``ocr`` says which made the row.
PARSE_FIELDS = {
    "ocr": "whether the blocks were read by OCR (one page) or from the text layer (a range)",
    "blocks": "JSON: the range's blocks (operators.parsing.parse.Block.as_row)",
    "page_errors": "JSON list: pages that could not be parsed, with why",
    "parse_s": "seconds of the parse",
    "parse_mb": "peak memory of the parsing process",
}
# One row per document out of the structure stage (a parsed PDF or a JSONL passage).
DOCUMENT_FIELDS = {
    "doc_id": "sha256 of the file's bytes (of a passage: of its id and text)",
    "uri": "the file (a passage: corpus.jsonl#id)",
    "size": "bytes",
    "n_pages": "pages (0 for a passage)",
    "status": "bookindex.operators.kinds.DOCUMENT_STATUSES",
    "error": "why it failed, or needs OCR",
    "warning": "a problem that did not stop it",
    "failure_stage": "the stage it failed in",
    "traceback": "the tail of the failure's traceback",
    "title": "the document's title",
    "n_nodes": "tree nodes",
    "nodes": "JSON list: the tree nodes (operators.structure.tree.Node fields), in order",
    "toc": "JSON list: the TOC skeleton (operators.structure.tree.toc_skeleton)",
    "page_labels": "JSON list: the printed page labels",
    "outline_used": "whether the PDF's outline shaped the headings",
    "section_filter": "the section filter that decided the headings (operators.structure."
    "assemble.filter_used: learned, rules, or rules (fallback: why)); empty for a passage",
    "n_sections": "section nodes",
    "n_ocr_pages": "pages read by OCR",
    "page_errors": "JSON list: pages that could not be parsed, with why",
    "edges": "JSON list: the layout graph's edge rows (operators.graph.layout_graph)",
    "communities": "JSON object: node_id → Louvain community",
    "stage_timings": "JSON object: stage → seconds",
    "stage_memory": "JSON object: stage → peak memory MB",
    "stage_nodes": "JSON object: stage → id of the Ray node it ran on",
    "n_ranges": "page ranges it was parsed in (0 for a passage)",
    "source": "pdf or passage",
    "section_review": "JSON (with a generative model, until its answers are applied): the LLM "
    "refiner's windows (number, candidate block indices, chat messages), the reviewed "
    "candidates and the document's metadata; empty otherwise",
    "section_blocks": "JSON (idem): the blocks the tree was assembled from, to rebuild it",
    "section_decisions": "JSON list: per reviewed candidate, the rule's and the model's level "
    "(operators.structure.llm_refiner.Review fields; the section_decisions table)",
    "section_errors": "JSON list: refiner windows without a usable answer, with why",
}
# Added by the enrich stage (pipelines.enrich.EnrichStage; its worker: pipelines/enrich_worker.py).
ENRICH_FIELDS = {
    "nodes": "(rewritten) with the figure and table descriptions a vision model made",
    "node_vectors": "float32 bytes: one vector per node, in node order",
    "sentence_counts": "JSON list: per node, the sentences Chunk-Zoom ranks (a passage's "
    "leaves; operators.graph.entity_linking.chunk_sentences), or null (a PDF's nodes)",
    "sentence_vectors": "float32 bytes: one vector per counted sentence, in node order",
    "vector_width": "the width of every vector of the row (the embedder's)",
    "embed_runtime": "JSON object: what embedded the row where it ran (the offline embedder's "
    "runtime_record: runtime, device, int8 instructions); empty for an endpoint embedder",
    "entities": "JSON list: the entities after resolution within the document "
    "(name, type, description, aliases, node_ids, structural_key)",
    "entity_vectors": "float32 bytes: one name vector per entity",
    "relations": "JSON list: source, target (indices into entities), type, weight, "
    "description, node_id",
    "er_decisions": "JSON list: the decisions within the document (operators.graph.resolution."
    "Decision fields)",
    "enrich_errors": "JSON list: nodes whose extraction failed, with why",
    "stage_tokens": "JSON object: stage → model tokens",
}
# What the driver leaves in Ray: per node or per edge, too big to collect.
HEAVY = ("nodes", "edges", "communities", "node_vectors", "sentence_vectors")


def to_json(value: Any) -> str:
    return json.dumps(value)


def from_json(text: str | None, default: Any = None) -> Any:
    """A JSON field's value; ``default`` for a missing or empty field."""
    return json.loads(text) if text else default


def encode_vectors(vectors: np.ndarray) -> bytes:
    return np.ascontiguousarray(vectors, np.float32).tobytes()


def decode_vectors(raw: bytes, n: int, width: int) -> np.ndarray:
    """``n`` vectors of ``width`` floats (read-only: a view of ``raw``)."""
    return np.frombuffer(raw, np.float32).reshape(n, width)


def ray_node_id() -> str:
    """The id of the Ray node this code runs on ("" outside Ray). Never imports Ray: code on
    a Ray worker has it imported already, and a plain process (the unit tier) has no node."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return ""
    return ray.get_runtime_context().get_node_id()


def document_row(first: dict, page_errors: list[str]) -> dict:
    """A document row with the facts of its probe row ``first`` and nothing assembled yet."""
    row = {k: first[k] for k in ("doc_id", "uri", "size", "n_pages", "status", "error")}
    row.update({k: first[k] for k in ("warning", "failure_stage", "traceback")})
    row.update(title="", n_nodes=0, nodes="[]", toc="[]", page_labels="[]", outline_used=False)
    row["section_filter"] = ""
    row.update(n_sections=0, page_errors=to_json(page_errors), edges="[]", communities="{}")
    row["n_ocr_pages"] = 0
    row["stage_nodes"] = "{}"
    row.update(section_review="", section_blocks="", section_decisions="[]", section_errors="[]")
    return row


def passage_document_row(passage: Passage) -> dict:
    """The document row of a JSONL passage (the same fields as a parsed PDF's)."""
    from bookindex.operators.structure.passages import passage_nodes

    nodes, toc = passage_nodes(passage)
    node_dicts = [asdict(n) for n in nodes]
    return {
        "doc_id": passage.doc_id,
        "uri": passage.uri,
        "size": len(passage.text.encode("utf-8")),
        "n_pages": 0,
        "status": OK,
        "error": "",
        "warning": "",
        "failure_stage": "",
        "traceback": "",
        "title": passage.title,
        "n_nodes": len(nodes),
        "nodes": to_json(node_dicts),
        "toc": to_json(toc),
        "page_labels": "[]",
        "outline_used": False,
        "section_filter": "",
        "n_sections": 0,
        "n_ocr_pages": 0,
        "page_errors": "[]",
        "stage_timings": "{}",
        "stage_memory": "{}",
        "stage_nodes": "{}",
        "n_ranges": 0,
        "source": "passage",
        "section_review": "",
        "section_blocks": "",
        "section_decisions": "[]",
        "section_errors": "[]",
        **graph_columns(node_dicts, passage.doc_id),  # edges: the one part_of
    }
