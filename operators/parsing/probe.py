"""The first look at each input file: identity, readability, page count (discovery:
``operators.parsing.discovery``).

Every problem becomes a ``Problem`` with the stage and a message a user can act on; nothing
here raises for bad input.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pymupdf

from bookindex.operators.parsing.ocr import image_only_pages
from bookindex.operators.parsing.parse import document_metadata

PDF_SUFFIX = ".pdf"
_MAGIC = b"%PDF-"


@dataclass
class InputFile:
    uri: str  # absolute path
    doc_id: str  # sha256 of the bytes; "" when the file could not be read
    size: int
    error: str = ""


@dataclass
class Problem:
    uri: str
    stage: str
    error: str
    doc_id: str = ""


@dataclass
class Probe:
    """What opening a PDF told us. ``status`` is ok, failed or needs_ocr."""

    status: str
    n_pages: int = 0
    error: str = ""
    warning: str = ""  # indexed, but the user should know (a repaired file, say)
    meta: dict = field(
        default_factory=dict
    )  # operators.parsing.parse.document_metadata, when opened
    ocr_pages: list[int] = field(default_factory=list)  # 1-based pages without a text layer


def _identify(uri: str) -> InputFile:
    try:
        digest = hashlib.sha256()
        size = 0
        with open(uri, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
                size += len(chunk)
        return InputFile(uri=uri, doc_id=digest.hexdigest(), size=size)
    except OSError as exc:
        return InputFile(uri=uri, doc_id="", size=0, error=f"cannot read file: {exc}")


def identify(uris: list[str], threads: int = 8) -> list[InputFile]:
    """sha256 and size of each file (hashing releases the GIL, so threads overlap I/O)."""
    if not uris:
        return []
    with ThreadPoolExecutor(max_workers=min(threads, len(uris))) as pool:
        return list(pool.map(_identify, uris))


def probe_pdf(uri: str) -> Probe:
    """Open a PDF and classify it: failed (with why), needs_ocr (no text layer), or ok."""
    try:
        with open(uri, "rb") as handle:
            head = handle.read(1024)
    except OSError as exc:
        return Probe("failed", error=f"cannot read file: {exc}")
    if not head:
        return Probe("failed", error="empty file (0 bytes)")
    if _MAGIC not in head:
        return Probe("failed", error="not a PDF: no %PDF- header in the first 1 KiB")
    try:
        doc = pymupdf.open(uri, filetype="pdf")
    except Exception as exc:
        return Probe("failed", error=f"corrupt or unreadable PDF: {exc}")
    with doc:
        if doc.needs_pass:
            return Probe("failed", error="encrypted PDF: a password is required")
        n_pages = doc.page_count
        repaired = doc.is_repaired
        if n_pages == 0:
            return Probe("failed", error="PDF has no pages")
        try:
            has_text = _has_text(doc)
            meta = document_metadata(doc)
            scanned = image_only_pages(doc)
        except Exception as exc:
            return Probe("failed", n_pages=n_pages, error=f"corrupt PDF: {exc}")
    repair = ["damaged PDF repaired on open; content may be incomplete"] if repaired else []
    warning = "; ".join(repair + meta["problems"])
    if not has_text:
        return Probe(
            "needs_ocr",
            n_pages=n_pages,
            error="no text layer: needs OCR",
            warning=warning,
            meta=meta,
            ocr_pages=scanned,
        )
    return Probe("ok", n_pages=n_pages, warning=warning, meta=meta, ocr_pages=scanned)


def _has_text(doc: pymupdf.Document, sample: int = 12) -> bool:
    """Whether any of up to ``sample`` pages spread over the document has text; stops at the
    first that does (a text PDF costs one page's extraction, an image-only one ``sample``)."""
    step = max(1, doc.page_count // sample)
    return any(doc[i].get_text("text").strip() for i in range(0, doc.page_count, step))


def page_ranges(n_pages: int, pages_per_task: int) -> list[tuple[int, int]]:
    """[start, stop) ranges covering the document, each at most ``pages_per_task`` long."""
    size = max(1, pages_per_task)
    return [(start, min(start + size, n_pages)) for start in range(0, n_pages, size)]
