"""The running heads and footers (folios, running titles) that the index job set aside as page
furniture, for the viewer's page view. They are not nodes: the tree leaves them out
(``operators.structure.tree``) and the index keeps no row of them. The viewer recomputes them
from the PDF with the index job's own rules: the document's pages parsed as the index job
parses them (``operators.parsing.parse.parse_pages``), then ``furniture.mark_headers_footers``,
the first step of block typing, which alone decides what is a header or a footer. The same
code on the same pages gives the index job's decision; an index built by another version of
these rules may have decided otherwise (the build is on the corpus view), and a page read by
OCR has no text layer here, so no furniture is found on it.

The rules look across the whole document (what repeats from page to page), so a document is
read once, in a child process (a few seconds for a 500-page book), and its furniture kept:

    heads = RunningHeads()
    heads.of(doc_id, uri)          # {page: [{"kind": "header", "bbox": [...], "text": ...}]}
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import pymupdf

from bookindex.operators.kinds import FOOTER, HEADER
from bookindex.operators.parsing.isolation import Isolated, run_isolated
from bookindex.operators.parsing.parse import parse_pages
from bookindex.operators.structure.furniture import mark_headers_footers

TIMEOUT_S = 600.0
MEMORY_MB = 4096
KEPT = 32  # documents whose furniture is kept (the least recently used go first)
TEXT_CHARS = 200


def find_furniture(path: str) -> dict[int, list[dict]]:
    """Page (1-based) → the blocks the index job's rules mark as running heads or footers:
    ``kind`` (header or footer), ``bbox`` (points, unrotated page, origin top left), ``text``."""
    with pymupdf.open(path, filetype="pdf") as doc:
        n_pages = doc.page_count
        blocks = parse_pages(doc, 0, n_pages).blocks
    mark_headers_footers(blocks, n_pages)
    out: dict[int, list[dict]] = {}
    for b in blocks:
        if b.kind in (HEADER, FOOTER):
            box = [round(float(v), 2) for v in (b.x0, b.y0, b.x1, b.y1)]
            item = {"kind": b.kind, "bbox": box, "text": b.text.strip()[:TEXT_CHARS]}
            out.setdefault(b.page, []).append(item)
    return out


class RunningHeads:
    """Each document's furniture, found once (in a child process) and kept; two requests for
    one document wait for one reading."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._found: OrderedDict[str, dict[int, list[dict]]] = OrderedDict()
        self._reading: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()
        self.readings = 0

    def of(self, doc_id: str, path: str) -> dict[int, list[dict]]:
        """The furniture of the document ``doc_id`` at ``path`` (the caller has checked that the
        file is that document). ``RuntimeError`` with a short reason when the reading failed."""
        with self._lock:
            if doc_id in self._found:
                self._found.move_to_end(doc_id)
                return self._found[doc_id]
            reading = self._reading.setdefault(doc_id, threading.Lock())
        with reading:
            with self._lock:
                if doc_id in self._found:
                    return self._found[doc_id]
            try:
                found = run_isolated(find_furniture, path, timeout_s=TIMEOUT_S, memory_mb=MEMORY_MB)
            except Isolated as exc:
                reason = exc.reason[:120]
                raise RuntimeError(f"the page furniture could not be read ({reason})") from None
            with self._lock:
                self.readings += 1
                self._found[doc_id] = found
                self._reading.pop(doc_id, None)
                while len(self._found) > self.kept:
                    self._found.popitem(last=False)
        return found
