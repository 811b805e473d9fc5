"""Arrow schemas of the Lance tables (docs/architecture.md §4). One place, so every writer agrees.

``nodes`` and ``entities`` hold vectors of the configured embedder's width: their schemas are
built for a width (``nodes_schema(dim)``, ``entities_schema(dim)``, ``schema_for``); an index
keeps the width it was built with (``lance_store.vector_width``).
"""

from __future__ import annotations

import pyarrow as pa

DOCUMENTS, NODES, FAILURES = "documents", "nodes", "failures"
ENTITIES, MENTIONS, RELATIONS, ER_DECISIONS = "entities", "mentions", "relations", "er_decisions"
EDGES, COMMUNITIES = "edges", "communities"  # the LAD-RAG document graph (operators/layout_graph)
SECTION_DECISIONS = "section_decisions"  # the LLM section refiner's (BookRAG §4.2.2)
VECTOR_TABLES = (NODES, ENTITIES)


documents_schema = pa.schema(
    [
        ("doc_id", pa.string()),  # sha256 of the file bytes
        ("uri", pa.string()),
        ("title", pa.string()),
        ("n_pages", pa.int32()),
        ("status", pa.string()),  # one of operators.kinds.DOCUMENT_STATUSES
        ("error", pa.string()),
        ("stage_timings", pa.string()),  # JSON: stage → seconds
        ("indexed_at", pa.timestamp("us", tz="UTC")),
        ("file_size", pa.int64()),
        ("n_nodes", pa.int32()),
        ("n_sections", pa.int32()),
        ("outline_used", pa.bool_()),
        ("page_labels", pa.list_(pa.string())),
        ("toc", pa.string()),  # JSON: the TOC skeleton, see operators.structure.tree.toc_skeleton
        ("build", pa.string()),  # JSON: what built the rows (pipelines/provenance.py)
        ("ocr_pages", pa.int32()),  # pages read by OCR (no text layer)
    ]
)


def _vector(dim: int | None) -> pa.DataType:
    """float32 vectors of width ``dim`` (None: any width, for the empty read of a table that
    does not exist yet)."""
    return pa.list_(pa.float32()) if dim is None else pa.list_(pa.float32(), dim)


def nodes_schema(dim: int | None) -> pa.Schema:
    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("node_id", pa.string()),
            ("parent_id", pa.string()),
            ("kind", pa.string()),  # root/section/text/list/table/image/caption/formula
            ("level", pa.int32()),
            ("title", pa.string()),
            ("text", pa.string()),
            ("page_start", pa.int32()),
            ("page_end", pa.int32()),
            ("bbox", pa.list_(pa.float32(), 4)),
            ("sec_id", pa.int32()),
            ("para_idx", pa.int32()),
            ("order", pa.int32()),
            ("n_tokens", pa.int32()),
            ("children", pa.list_(pa.int32())),
            ("n_paragraphs", pa.int32()),
            ("font_size", pa.float32()),
            ("bold", pa.bool_()),
            ("summary", pa.string()),
            ("vector", _vector(dim)),  # null when the job ran without enrich
            # a passage leaf's sentences (operators.graph.entity_linking.chunk_sentences), in
            # order; null for PDF nodes and without enrich
            ("sentence_vectors", pa.list_(_vector(dim))),
        ]
    )


failures_schema = pa.schema(
    [
        ("uri", pa.string()),
        ("doc_id", pa.string()),
        ("stage", pa.string()),
        ("error", pa.string()),
        ("traceback_tail", pa.string()),
        ("failed_at", pa.timestamp("us", tz="UTC")),
    ]
)


def entities_schema(dim: int | None) -> pa.Schema:
    return pa.schema(
        [
            ("entity_id", pa.string()),
            ("name", pa.string()),
            ("type", pa.string()),
            ("description", pa.string()),
            ("aliases", pa.list_(pa.string())),
            ("vector", _vector(dim)),  # the name's embedding
            ("n_mentions", pa.int32()),
            ("n_documents", pa.int32()),
            ("doc_id", pa.string()),  # tables/figures: their document; "" for corpus entities
        ]
    )


mentions_schema = pa.schema(
    [
        ("entity_id", pa.string()),
        ("doc_id", pa.string()),
        ("node_id", pa.string()),
        ("name", pa.string()),  # the surface form found in this document
    ]
)

relations_schema = pa.schema(
    [
        ("src_entity", pa.string()),
        ("dst_entity", pa.string()),
        ("type", pa.string()),
        ("description", pa.string()),
        ("doc_id", pa.string()),
        ("node_id", pa.string()),
        ("weight", pa.float32()),
    ]
)

er_decisions_schema = pa.schema(
    [
        ("doc_id", pa.string()),
        ("scope", pa.string()),  # document (within one document) or corpus
        ("new_name", pa.string()),
        ("new_type", pa.string()),
        ("candidates", pa.list_(pa.string())),
        ("candidate_ids", pa.list_(pa.string())),
        ("scores", pa.list_(pa.float32())),
        ("selected", pa.list_(pa.string())),
        ("action", pa.string()),  # new / exact / merge / select / llm
        ("reason", pa.string()),
        ("entity_id", pa.string()),
        ("decided_at", pa.timestamp("us", tz="UTC")),
    ]
)

edges_schema = pa.schema(
    [
        ("doc_id", pa.string()),
        ("src_node", pa.string()),
        ("dst_node", pa.string()),
        ("type", pa.string()),  # part_of / next / caption_of / references / continues
        ("weight", pa.float32()),
    ]
)

communities_schema = pa.schema(
    [
        ("doc_id", pa.string()),
        ("node_id", pa.string()),
        ("community", pa.int32()),  # Louvain community within the document, 0 = the root's
    ]
)

# One row per title candidate the LLM section refiner reviewed (--models openai|vllm;
# operators/structure/llm_refiner.py, pipelines/model_requests.py): what the rules decided and
# what the model answered. The tree holds the model's level where it answered, else the rule's.
section_decisions_schema = pa.schema(
    [
        ("doc_id", pa.string()),
        ("block_index", pa.int32()),  # the candidate's block in the document's block order
        ("text", pa.string()),  # the candidate's text (a title split over blocks: joined)
        ("page", pa.int32()),  # 1-based
        ("window", pa.int32()),  # the refiner request it was reviewed in
        ("rule_level", pa.int32()),  # the base (rules / learned) decision; 0: not a title
        ("model_level", pa.int32()),  # the model's; 0: not a title; null: no usable answer
        ("probability", pa.float32()),  # the learned filter's P(title); null with the rules
        ("error", pa.string()),  # why its window got no usable answer ("" when it did)
        ("decided_at", pa.timestamp("us", tz="UTC")),
    ]
)

# The tables without vectors; ``schema_for`` answers for every table.
SCHEMAS = {
    DOCUMENTS: documents_schema,
    FAILURES: failures_schema,
    MENTIONS: mentions_schema,
    RELATIONS: relations_schema,
    ER_DECISIONS: er_decisions_schema,
    EDGES: edges_schema,
    COMMUNITIES: communities_schema,
    SECTION_DECISIONS: section_decisions_schema,
}
TABLES = (
    DOCUMENTS,
    NODES,
    FAILURES,
    ENTITIES,
    MENTIONS,
    RELATIONS,
    ER_DECISIONS,
    EDGES,
    COMMUNITIES,
    SECTION_DECISIONS,
)
_VECTOR_SCHEMAS = {NODES: nodes_schema, ENTITIES: entities_schema}


def schema_for(table: str, dim: int | None = None) -> pa.Schema:
    """The schema of any table; ``nodes`` and ``entities`` for vectors of width ``dim`` (None:
    any width, for an empty read)."""
    if table in _VECTOR_SCHEMAS:
        return _VECTOR_SCHEMAS[table](dim)
    return SCHEMAS[table]
