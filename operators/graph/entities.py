"""Entities and relations per tree node (BookRAG §4.3.1), for one document at a time.

Order of work for a document:
1. Tables, images and formulas first become typed entities of their own (named by their
   caption, else by kind and page). A table's column headers (its first row) and row headers
   (the first cell of every later row) become ``TABLE_HEADER`` entities linked to the table by
   ``contained_in``.
2. Text nodes (paragraphs, lists, captions, section titles) go through the backend's
   ``extract_entities`` in one batch: named entities and the relations between them.
3. Passage corpora (JSONL) also take the passage title as an entity (``TOPIC``): it is the
   name the passage is about, even when the text only says "he" or "the film".

The result is document-local: names are merged within the document by the resolver
(operators.graph.resolution) before the corpus-wide resolution.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from bookindex.operators import kinds
from bookindex.operators.models import ExtractedEntity, ExtractedRelation

log = logging.getLogger(__name__)
TABLE, IMAGE, FORMULA, TABLE_HEADER, TOPIC = "TABLE", "IMAGE", "FORMULA", "TABLE_HEADER", "TOPIC"
# Entities that stand for one object of one document: never merged across documents.
STRUCTURAL_TYPES = {TABLE, IMAGE, FORMULA}
CONTAINED_IN = "contained_in"
_TEXT_KINDS = (kinds.TEXT, kinds.LIST, kinds.CAPTION, kinds.SECTION)
_MAX_HEADER_CHARS = 80
_MAX_HEADERS = 40


@dataclass
class LocalEntity:
    """An entity as found in one document, before corpus resolution."""

    name: str
    type: str
    description: str
    node_ids: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    structural_key: str = ""  # doc_id/node_id for tables, images and formulas

    def mention(self, node_id: str) -> None:
        if node_id not in self.node_ids:
            self.node_ids.append(node_id)


@dataclass
class LocalRelation:
    source: int  # index into the document's entity list
    target: int
    type: str
    weight: float
    description: str
    node_id: str


@dataclass
class NodeExtraction:
    """Everything extracted from one document, in node order."""

    entities: list[LocalEntity] = field(default_factory=list)
    relations: list[LocalRelation] = field(default_factory=list)
    # "node_id: error" for nodes that failed, and a failed batch call that was retried per text
    errors: list[str] = field(default_factory=list)


def structural_entity_id(doc_id: str, node_id: str, kind: str) -> str:
    return "s" + hashlib.sha1(f"{doc_id}/{node_id}/{kind}".encode()).hexdigest()[:16]


def table_headers(text: str) -> list[str]:
    """Column headers (first row) and row headers (first cell of later rows) of a table node,
    whose text is rows joined by newlines and cells by " | "."""
    rows = [[c.strip() for c in line.split(" | ")] for line in text.split("\n") if line.strip()]
    if len(rows) < 2:
        return []
    headers = list(rows[0]) + [r[0] for r in rows[1:] if r]
    seen: list[str] = []
    for h in headers:
        h = " ".join(h.split())
        if (
            h
            and len(h) <= _MAX_HEADER_CHARS
            and any(c.isalpha() for c in h)
            and h.lower() not in {s.lower() for s in seen}
        ):
            seen.append(h)
    return seen[:_MAX_HEADERS]


def modal_entity_name(node: dict) -> str:
    """The name of a table's, figure's or formula's entity: its caption, else "Table on page
    N" with N the node's 1-based page (``page_start``, as every node holds it)."""
    caption = (node.get("title") or "").strip()
    return caption or f"{node['kind'].capitalize()} on page {node['page_start']}"


def extract_document(
    doc_id: str,
    nodes: list[dict],
    extract_batch,
    title_is_entity: bool = False,
) -> NodeExtraction:
    """Entities and relations of one document's nodes.

    ``extract_batch(texts) -> [(entities, relations), ...]`` is the backend's batched
    extraction; an exception for the whole batch falls back to one call per node (recorded in
    ``errors``), so that a node whose model answer is unusable is recorded in ``errors`` too and
    the others still count.
    """
    out = NodeExtraction()
    by_key: dict[tuple[str, str], int] = {}

    def add(entity: ExtractedEntity, node_id: str, key: str = "") -> int:
        k = (key or entity.name.lower(), entity.type if key else "")
        if k not in by_key:
            by_key[k] = len(out.entities)
            out.entities.append(
                LocalEntity(entity.name, entity.type, entity.description, structural_key=key)
            )
        index = by_key[k]
        out.entities[index].mention(node_id)
        return index

    for node in nodes:
        kind = node["kind"]
        if kind not in kinds.MODAL_KINDS:
            continue
        label = {kinds.TABLE: TABLE, kinds.IMAGE: IMAGE, kinds.FORMULA: FORMULA}[kind]
        name = modal_entity_name(node)
        description = (node.get("summary") or node.get("text") or "")[:300]
        key = f"{doc_id}/{node['node_id']}"
        table_index = add(ExtractedEntity(name[:200], label, description), node["node_id"], key)
        if kind == "table":
            for header in table_headers(node.get("text") or ""):
                h = add(
                    ExtractedEntity(header, TABLE_HEADER, f"header of {name[:120]}"),
                    node["node_id"],
                )
                out.relations.append(
                    LocalRelation(h, table_index, CONTAINED_IN, 1.0, "", node["node_id"])
                )

    if title_is_entity:
        root = next((n for n in nodes if n["kind"] == "root"), None)
        if root and root.get("title", "").strip():
            add(ExtractedEntity(root["title"].strip(), TOPIC, root["title"]), root["node_id"])

    text_nodes = [n for n in nodes if node_text(n).strip()]
    results = _extract_all([node_text(n) for n in text_nodes], extract_batch, out, text_nodes)
    for node, result in zip(text_nodes, results, strict=True):
        if result is None:
            continue
        entities, relations = result
        local = {e.name: add(e, node["node_id"]) for e in entities}
        for r in relations:
            if r.source in local and r.target in local and r.source != r.target:
                out.relations.append(
                    LocalRelation(
                        local[r.source],
                        local[r.target],
                        r.type,
                        r.weight,
                        r.description,
                        node["node_id"],
                    )
                )
    return out


def extract_documents(
    documents: list[tuple[str, list[dict], bool]], extract_batch
) -> list[NodeExtraction]:
    """``extract_document`` for many documents (``(doc_id, nodes, title_is_entity)``) with one
    ``extract_batch`` call over the distinct texts of all their text nodes (a model pass over
    a batch costs far less than one per document; a text that recurs is read once). Each text's
    result is the one a call per document gives (the backends read each text on its own). When
    the shared call raises, each document is extracted on its own (``extract_document``'s
    per-node fallback records the failing nodes) and the failed shared call is logged."""
    distinct = list(dict.fromkeys(node_text(n) for _, nodes, _ in documents for n in nodes))
    distinct = [t for t in distinct if t.strip()]
    try:
        found = dict(zip(distinct, extract_batch(distinct) if distinct else [], strict=True))
    except Exception as exc:  # logged; a document that fails again alone records it
        log.warning("%s", _batch_failed(exc, len(distinct), f"{len(documents)} documents"))
        return [extract_document(d, nodes, extract_batch, t) for d, nodes, t in documents]
    return [
        extract_document(d, nodes, lambda texts: [found[x] for x in texts], title)
        for d, nodes, title in documents
    ]


def node_text(node: dict) -> str:
    """What NER reads: a section's title, a paragraph's text, a figure's model description."""
    kind = node["kind"]
    if kind == "section":
        return node.get("title") or ""
    if kind == "image":
        return node.get("summary") or ""
    return node.get("text") or "" if kind in _TEXT_KINDS else ""


def _extract_all(
    texts: list[str], extract_batch, out: NodeExtraction, nodes: list[dict]
) -> list[tuple[list[ExtractedEntity], list[ExtractedRelation]] | None]:
    if not texts:
        return []
    try:
        return list(extract_batch(texts))
    except Exception as exc:
        out.errors.append(_batch_failed(exc, len(texts), "the document's batch"))
    results: list = []
    for text, node in zip(texts, nodes, strict=True):
        try:
            results.append(extract_batch([text])[0])
        except Exception as exc:  # this node's failure alone
            out.errors.append(f"{node['node_id']}: {type(exc).__name__}: {exc}"[:500])
            results.append(None)
    return results


def _batch_failed(exc: BaseException, n_texts: int, what: str) -> str:
    """The warning a failed batch call leaves (its texts are then extracted one by one)."""
    problem = f"entity extraction of {what} ({n_texts} texts) failed, retried text by text"
    return f"{problem}: {type(exc).__name__}: {exc}"[:500]
