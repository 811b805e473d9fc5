"""The index's vocabulary, declared once: block kinds, node kinds, layout edge types, document
statuses, question classes. Every module that names one imports it from here (docs/architecture.md, "Tables").
"""

from __future__ import annotations

# Blocks (operators/parsing, operators/structure/blocks.py): what a piece of a page is.
TEXT, TABLE, IMAGE, FORMULA = "text", "table", "image", "formula"
HEADER, FOOTER, CAPTION, LIST, TITLE = "header", "footer", "caption", "list", "title"

# Tree nodes (operators/structure/tree.py): the root, sections, and the leaves under them.
ROOT, SECTION = "root", "section"
STRUCTURE_KINDS = (ROOT, SECTION)
LEAF_KINDS = (TEXT, LIST, TABLE, IMAGE, CAPTION, FORMULA)
NODE_KINDS = STRUCTURE_KINDS + LEAF_KINDS
MAX_LEVEL = 6  # heading levels are 1 (parts, chapters) .. MAX_LEVEL
FIGURE_KINDS = (TABLE, IMAGE)  # leaves a caption can belong to
MODAL_KINDS = (TABLE, IMAGE, FORMULA)  # what Filter_Modal selects

# Layout graph edges (operators/graph/layout_graph.py, LAD-RAG), with their weights for the
# Louvain communities.
EDGE_WEIGHTS: dict[str, float] = {
    "part_of": 1.0,
    "next": 1.0,
    "caption_of": 2.0,
    "references": 1.0,
    "continues": 2.0,
}
EDGE_TYPES = tuple(EDGE_WEIGHTS)

# Documents (the ``documents`` table): what became of an input file.
OK, FAILED, SKIPPED, NEEDS_OCR = "ok", "failed", "skipped", "needs_ocr"
DOCUMENT_STATUSES = (OK, FAILED, SKIPPED, NEEDS_OCR)

# Questions (operators/query/rules.py, BookRAG Table 2): their classes, the structural filters
# and the operations of a global question. The model schemas (operators/models/prompts.py) use
# them as their enumerations.
SINGLE, MULTI, GLOBAL = "single-hop", "multi-hop", "global"
QUERY_CLASSES = (SINGLE, MULTI, GLOBAL)
FILTER_TYPES = ("section", "image", "table", "page")
OPERATIONS = ("COUNT", "LIST", "SUMMARIZE", "ANALYZE")
