"""What each table and column of an index means, beside the schemas (``schemas.py``): the
source of docs/tables.md (``bookindex schema --markdown``). A test checks that every column of
every schema is described here and nothing else is."""

from __future__ import annotations

from bookindex.pipelines.store.schemas import TABLES, schema_for

TABLES_DOC = {
    "documents": "one row per input file or passage; written last by a run (the commit marker)",
    "nodes": "one row per node of a document's tree: root, section, paragraph, list, table, "
    "figure, caption, formula",
    "failures": "one row per problem: a file or passage that could not be read, or a step that "
    "failed for it",
    "entities": "one row per canonical entity of the corpus (after entity resolution)",
    "mentions": "one row per entity → node link",
    "relations": "one row per relation between two entities, found in a node",
    "er_decisions": "one row per entity-resolution decision",
    "edges": "one row per edge of a document's layout graph (LAD-RAG)",
    "communities": "one row per node: its Louvain community in its document's layout graph",
    "section_decisions": "one row per title candidate the LLM section refiner reviewed "
    "(--models openai|vllm)",
}

COLUMNS_DOC: dict[str, dict[str, str]] = {
    "documents": {
        "doc_id": "sha256 of the file's bytes (a passage: of its id, title and text)",
        "uri": "the file's resolved path; a passage: `corpus.jsonl#id`",
        "title": "the document's title (the tree's root)",
        "n_pages": "pages in the PDF (0 for a passage)",
        "status": "ok, failed, skipped or needs_ocr",
        "error": "why it failed or needs OCR (empty when ok)",
        "stage_timings": "JSON: stage → seconds spent on this document",
        "indexed_at": "when the run that wrote it committed it",
        "file_size": "bytes of the file",
        "n_nodes": "nodes of its tree",
        "n_sections": "headings of its tree (the root not counted)",
        "outline_used": "whether the PDF's outline (bookmarks) informed the heading tree",
        "page_labels": "the PDF's page labels (printed page numbers), where it has them",
        "toc": "JSON: the table of contents: sec_id, level, title, page, n_paragraphs per heading",
        "build": "JSON: what built the rows: stage output fingerprints, models, options; "
        "and what ran (runtime: the section filter, the embedder) (provenance)",
        "ocr_pages": "pages read by OCR (pages without a text layer)",
    },
    "nodes": {
        "doc_id": "the document",
        "node_id": "the node's id, unique in the index",
        "parent_id": "its parent in the tree (the root's is empty)",
        "kind": "root, section, text, list, table, image, caption or formula",
        "level": "depth in the tree (0: the root, 1: a chapter, ...)",
        "title": "a heading's or caption's text; a table's or figure's caption",
        "text": "the node's text (a table: its cells, row by row)",
        "page_start": "first page (1-based)",
        "page_end": "last page (1-based)",
        "bbox": "its box on page_start, in PDF points: x0, y0, x1, y1 (origin top left, as PyMuPDF)",
        "sec_id": "DeepRead coordinate: the section, numbered in document order (0: the root)",
        "para_idx": "DeepRead coordinate: the paragraph within its section (0: the heading)",
        "order": "reading order within the document",
        "n_tokens": "word pieces of its text",
        "children": "a section's (or the root's) child sections, by sec_id",
        "n_paragraphs": "the leaves directly under a section (or the root)",
        "font_size": "the text's font size, points",
        "bold": "whether the text is set bold",
        "summary": "a figure's or table's description by the vision model (when configured)",
        "vector": "the embedding of the node's text (null without enrich)",
        "sentence_vectors": "a passage leaf's sentences' embeddings, the chunks ZoomRAG's "
        "Chunk-Zoom ranks (null for PDF nodes and without enrich)",
    },
    "failures": {
        "uri": "the input as named",
        "doc_id": "the document, when it got that far",
        "stage": "where it failed: discover, read, probe, parse, ocr, assemble, enrich, ...",
        "error": "what went wrong, for a person",
        "traceback_tail": "the end of the traceback, for a developer",
        "failed_at": "when",
    },
    "entities": {
        "entity_id": "the entity's id",
        "name": "its canonical name",
        "type": "spaCy's or the model's entity type (PERSON, ORG, ...), or table, image, formula",
        "description": "what the corpus says of it (sentences, or the model's description)",
        "aliases": "other names resolved to it",
        "vector": "the embedding of its name",
        "n_mentions": "nodes that mention it",
        "n_documents": "documents that mention it",
        "doc_id": "a table's or figure's document; empty for corpus entities",
    },
    "mentions": {
        "entity_id": "the entity",
        "doc_id": "the document",
        "node_id": "the node that mentions it",
        "name": "the surface form found in this document",
    },
    "relations": {
        "src_entity": "the first entity",
        "dst_entity": "the second entity",
        "type": "the relation (co-occurrence offline; the model's otherwise)",
        "description": "the relation in words",
        "doc_id": "the document",
        "node_id": "the node it was found in",
        "weight": "its strength",
    },
    "er_decisions": {
        "doc_id": "the document of the new entity",
        "scope": "document (within one document) or corpus",
        "new_name": "the entity being resolved",
        "new_type": "its type",
        "candidates": "names of the existing entities it was compared with",
        "candidate_ids": "their ids",
        "scores": "their similarity scores",
        "selected": "the candidates the gradient rule kept",
        "action": "new, exact, merge, select or llm",
        "reason": "why",
        "entity_id": "the entity it became or joined",
        "decided_at": "when",
    },
    "edges": {
        "doc_id": "the document",
        "src_node": "from this node",
        "dst_node": "to this node",
        "type": "part_of, next, caption_of, references or continues",
        "weight": "the edge's weight",
    },
    "communities": {
        "doc_id": "the document",
        "node_id": "the node",
        "community": "its Louvain community within the document (0: the root's)",
    },
    "section_decisions": {
        "doc_id": "the document",
        "block_index": "the candidate's block in the document's block order",
        "text": "the candidate's text (a title split over blocks: joined)",
        "page": "its page (1-based)",
        "window": "the refiner request it was reviewed in",
        "rule_level": "the learned filter's (or rules') level; 0: not a title",
        "model_level": "the model's level; 0: not a title; null: no usable answer",
        "probability": "the learned filter's P(title); null with the rules",
        "error": "why its window got no usable answer (empty when it did)",
        "decided_at": "when",
    },
}


def markdown_reference() -> str:
    """docs/tables.md: every table, and every column with its Arrow type and meaning."""
    lines = [
        "# Tables of an index",
        "",
        "Generated by `bookindex schema --markdown` from `pipelines/store/schemas.py` and",
        "`pipelines/store/table_docs.py`; do not edit by hand (`make docs` rewrites it, and a test",
        "fails when it is out of date).",
        "",
        "An index is a directory with one Lance dataset per table (`<table>.lance`), readable",
        "with `lance`, `lancedb`, `pyarrow` or `polars`. A document exists for readers once its",
        "`documents` row does: a run writes every other table first and `documents` last.",
        "`nodes.vector` and `entities.vector` have the embedder's width (384 with the default",
        "all-MiniLM-L6-v2).",
    ]
    for table in TABLES:
        lines += ["", f"## `{table}`", "", TABLES_DOC[table] + ".", ""]
        lines += ["| column | type | meaning |", "|---|---|---|"]
        for field in schema_for(table, 384):
            meaning = COLUMNS_DOC[table][field.name].replace("|", "\\|")
            lines.append(f"| `{field.name}` | `{field.type}` | {meaning} |")
    return "\n".join(lines) + "\n"
