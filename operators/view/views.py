"""The viewer's document, section and page views as JSON-ready dicts, read from the query side's
read model (``operators.query.read_model.ReadModel``: node kinds, levels, pages, boxes, DeepRead
coordinates, the layout graph's caption links), so that they show exactly what the query
methods see and cost no I/O.

    document_view(model, doc)                  the heading tree (the stored TOC, each heading
                                               with its node), tables and figures with their
                                               captions and descriptions, nodes by kind
    section_view(model, doc, sec_id)           a section's heading and its leaves, in order
    page_view(model, doc, page, geometry)      every node that starts on the page, with its box
                                               on the page as shown; the nodes running on to it

A node everywhere: ``node_id``, ``kind``, ``level``, ``sec_id``, ``para_idx``, ``page``,
``page_end``, ``bbox`` (points, origin top left, on its first page), ``title``, ``text``.
"""

from __future__ import annotations

import numpy as np

from bookindex.operators.kinds import FORMULA, IMAGE, ROOT, SECTION, TABLE
from bookindex.operators.query.read_model import ReadModel
from bookindex.operators.view.pages import PageGeometry

FIGURE_KINDS = (TABLE, IMAGE, FORMULA)  # what the document view lists as tables and figures
PAGE_TEXT_CHARS = 600  # text of a node shown on hover in the page view
SECTION_TEXT_CHARS = 20_000  # text of a node in the section view
LIST_TEXT_CHARS = 400  # a table's or figure's text in the document view's list


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def node_row(
    model: ReadModel, position: int, chars: int, geometry: PageGeometry | None = None
) -> dict:
    """A node as the viewer shows it; its box mapped onto the shown page when ``geometry`` is
    given (a rotated page), else as stored."""
    box = model.bbox[position]
    has_box = bool(np.any(box)) and model.kind[position] != ROOT
    shown = (
        (geometry.box(box) if geometry else [round(float(v), 2) for v in box]) if has_box else None
    )
    return {
        "node_id": model.node_ids[position],
        "kind": str(model.kind[position]),
        "level": int(model.level[position]),
        "sec_id": int(model.sec_id[position]),
        "para_idx": int(model.para_idx[position]),
        "page": int(model.page_start[position]),
        "page_end": int(model.page_end[position]),
        "bbox": shown,
        "title": _cut(model.title[position], 300),
        "text": _cut(model.node_text(position), chars),
    }


def _header(model: ReadModel, doc: int) -> dict:
    d = model.documents[doc]
    return {"doc_id": d.doc_id, "name": d.name, "title": d.title, "n_pages": d.n_pages}


def document_view(model: ReadModel, doc: int) -> dict:
    """The document's heading tree, its tables and figures, and its nodes by kind."""
    d = model.documents[doc]
    lo, hi = model.doc_range(doc)
    tree = []
    for entry in d.toc:
        position = model.section_node(doc, int(entry["sec_id"]))
        tree.append(
            {
                "sec_id": int(entry["sec_id"]),
                "level": int(entry["level"]),
                "title": entry.get("title") or "",
                "page": int(entry.get("page") or 0),
                "n_paragraphs": int(entry.get("n_paragraphs") or 0),
                "node_id": model.node_ids[position] if position is not None else None,
            }
        )
    captions = _captions(model, lo, hi)
    figures = []
    for position in range(lo, hi):
        if model.kind[position] in FIGURE_KINDS:
            row = node_row(model, position, LIST_TEXT_CHARS)
            caption = captions.get(position)
            row["caption"] = _cut(model.node_text(caption), 300) if caption is not None else ""
            row["summary"] = _cut(model.summary[position], LIST_TEXT_CHARS)
            figures.append(row)
    kinds, counts = np.unique(model.kind[lo:hi].astype(str), return_counts=True)
    return {
        **_header(model, doc),
        "passage": d.passage,
        "tree": tree,
        "figures": figures,
        "kinds": {str(k): int(n) for k, n in zip(kinds, counts, strict=True)},
        "n_nodes": hi - lo,
    }


def _captions(model: ReadModel, lo: int, hi: int) -> dict[int, int]:
    """Figure position → its caption's position (the layout graph's caption_of edges)."""
    src, dst = model.edges.get("caption_of", (np.array([], int), np.array([], int)))
    inside = (dst >= lo) & (dst < hi)
    return {int(f): int(c) for c, f in zip(src[inside], dst[inside], strict=True)}


def section_view(model: ReadModel, doc: int, sec_id: int) -> dict:
    """A section's heading (the root for section 0) and the leaves directly under it, in
    paragraph order. ``KeyError`` when the document has no such section."""
    heading = model.section_node(doc, sec_id)
    if heading is None:
        raise KeyError("no such section in the document")
    nodes = [heading, *model.section_leaves(doc, sec_id)]
    return {
        **_header(model, doc),
        "sec_id": sec_id,
        "heading": node_row(model, heading, SECTION_TEXT_CHARS),
        "nodes": [node_row(model, p, SECTION_TEXT_CHARS) for p in nodes[1:]],
    }


def page_view(model: ReadModel, doc: int, page: int, geometry: PageGeometry) -> dict:
    """The nodes that start on ``page`` (1-based; the caller checks the range), in document
    order with their boxes on the page as shown, and those that began on an earlier page and
    run on to this one (their boxes are on their first page)."""
    lo, hi = model.doc_range(doc)
    starts = model.page_start[lo:hi]
    ends = model.page_end[lo:hi]
    kinds = model.kind[lo:hi]
    here = lo + np.flatnonzero((starts == page) & (kinds != ROOT))
    running = lo + np.flatnonzero((starts < page) & (ends >= page) & (kinds != ROOT))
    running = [p for p in running if model.kind[p] != SECTION]
    return {
        **_header(model, doc),
        "page": page,
        "width": geometry.width,
        "height": geometry.height,
        "rotation": geometry.rotation,
        "nodes": [node_row(model, int(p), PAGE_TEXT_CHARS, geometry) for p in here],
        "continued": [node_row(model, int(p), PAGE_TEXT_CHARS) for p in running],
    }
