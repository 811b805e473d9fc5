"""A document's pages as images and as geometry, for the viewer: rendered from the PDF the index
was built from, in a child process (``operators.parsing.isolation``: a page that crashes MuPDF
or outgrows its memory budget fails that request, not the server), sized within a cap, and kept
in a cache of rendered images.

    pages = PageImages(max_px=2400, cache_bytes=64 * 2**20)
    geometry = pages.geometry(doc_id, uri)          # every page: size in points, rotation
    png = pages.image(doc_id, uri, page=3, width=1200)

Only a document of the index reaches here: the caller looks ``doc_id`` up in the index and
passes the path the index recorded for it; nothing of a request names a file. Before a PDF is
opened, its bytes are checked against ``doc_id`` (the sha256 the index job stored; once per
size and modification time): a PDF moved or deleted since it was indexed is ``SourceMissing``,
one whose bytes changed ``SourceChanged``, each with a message that says what to do.

Node boxes are stored in PDF points with the origin at the top left of the unrotated page
(PyMuPDF's text coordinates); ``PageGeometry.matrix`` maps them onto the page as shown (the
rendered image), which differs only for a page with a ``/Rotate``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from bookindex.operators.parsing.isolation import Isolated, run_isolated
from bookindex.operators.parsing.probe import identify

MIN_WIDTH = 64  # pixels: the narrowest image asked for
RENDER_TIMEOUT_S = 60.0
RENDER_MEMORY_MB = 1024  # the rendering child's address space may grow by this much


class PageError(Exception):
    """Why a page cannot be shown: ``status`` (the HTTP status it maps to) and a message that
    names neither a path nor the request's input."""

    status = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SourceMissing(PageError):
    status = 410


class SourceChanged(PageError):
    status = 409


class NoSuchPage(PageError):
    status = 404


class RenderFailed(PageError):
    status = 502


@dataclass(frozen=True)
class PageGeometry:
    """One page as shown: its size in points, its rotation and the matrix (a, b, c, d, e, f)
    from the unrotated page's coordinates (the stored boxes) to the shown page's."""

    width: float
    height: float
    rotation: int
    matrix: tuple[float, float, float, float, float, float]

    def box(self, bbox: list[float] | tuple[float, ...]) -> list[float]:
        """A stored box (x0, y0, x1, y1, unrotated) on the shown page, rounded to 0.01 pt."""
        if self.rotation == 0:
            return [round(float(v), 2) for v in bbox]
        a, b, c, d, e, f = self.matrix
        x0, y0, x1, y1 = (float(v) for v in bbox)
        xs, ys = [], []
        for x, y in ((x0, y0), (x1, y0), (x0, y1), (x1, y1)):
            xs.append(a * x + c * y + e)
            ys.append(b * x + d * y + f)
        return [round(min(xs), 2), round(min(ys), 2), round(max(xs), 2), round(max(ys), 2)]


def read_geometry(path: str) -> list[PageGeometry]:
    """Every page's geometry (run in a child: it opens the PDF)."""
    with pymupdf.open(path, filetype="pdf") as doc:
        out = []
        for page in doc:
            m = page.rotation_matrix
            out.append(
                PageGeometry(
                    width=round(page.rect.width, 3),
                    height=round(page.rect.height, 3),
                    rotation=int(page.rotation),
                    matrix=(m.a, m.b, m.c, m.d, m.e, m.f),
                )
            )
        return out


def render_page(path: str, page: int, zoom: float) -> bytes:
    """Page ``page`` (1-based) as PNG at ``zoom`` pixels per point (run in a child)."""
    with pymupdf.open(path, filetype="pdf") as doc:
        pixmap = doc[page - 1].get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        return pixmap.tobytes("png")


def zoom_for(geometry: PageGeometry, width: int, max_px: int) -> float:
    """Pixels per point for an image ``width`` pixels wide, lowered so that neither side
    exceeds ``max_px`` pixels (a page ten times as tall as it is wide stays within the cap)."""
    zoom = width / max(geometry.width, 1.0)
    return min(zoom, max_px / max(geometry.height, 1.0), max_px / max(geometry.width, 1.0))


class PageImages:
    """Rendered pages and page geometry of the index's PDFs, cached. Thread-safe: the server
    calls it from worker threads. ``max_px``: the longest side of an image in pixels;
    ``cache_bytes``: the rendered images kept (least recently used dropped first)."""

    def __init__(self, max_px: int = 2400, cache_bytes: int = 64 * 2**20) -> None:
        self.max_px = max_px
        self.cache_bytes = cache_bytes
        self._images: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()
        self._held = 0
        self._geometry: dict[str, list[PageGeometry]] = {}
        self._checked: dict[str, tuple] = {}  # doc_id → the file's (size, mtime, inode) checked
        self._lock = threading.Lock()
        self.renders = 0  # images rendered (not from the cache)

    def check_source(self, doc_id: str, path: str) -> None:
        """``path`` still holds the PDF the index knows as ``doc_id`` (sha256 of its bytes),
        else ``SourceMissing`` or ``SourceChanged``; the hash is taken again only when the
        file's size, modification time or inode changed."""
        try:
            stat = os.stat(path)
        except OSError:
            raise SourceMissing(
                "the PDF is not where it was indexed from (moved or deleted): put it back, or "
                "index it again from its new place"
            ) from None
        seen = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
        with self._lock:
            if self._checked.get(doc_id) == seen:
                return
        found = identify([path])[0]
        if found.error:
            raise SourceMissing("the PDF the index was built from cannot be read any more")
        if found.doc_id != doc_id:
            raise SourceChanged(
                "the file at the indexed path is no longer the indexed PDF (its bytes "
                "changed): index it again to view it"
            )
        with self._lock:
            self._checked[doc_id] = seen

    def geometry(self, doc_id: str, path: str) -> list[PageGeometry]:
        """Every page's geometry (read once per document)."""
        self.check_source(doc_id, path)
        with self._lock:
            found = self._geometry.get(doc_id)
        if found is None:
            found = self._isolated(read_geometry, path)
            with self._lock:
                self._geometry[doc_id] = found
        return found

    def page_geometry(self, doc_id: str, path: str, page: int) -> PageGeometry:
        pages = self.geometry(doc_id, path)
        if not 1 <= page <= len(pages):
            raise NoSuchPage(f"the document has {len(pages)} pages")
        return pages[page - 1]

    def image(self, doc_id: str, path: str, page: int, width: int) -> bytes:
        """Page ``page`` (1-based) as PNG about ``width`` pixels wide (``MIN_WIDTH`` ..
        ``max_px``; a tall page narrower, so that its height stays within ``max_px``)."""
        if not MIN_WIDTH <= width <= self.max_px:
            raise ValueError(f"width must be between {MIN_WIDTH} and {self.max_px} pixels")
        geometry = self.page_geometry(doc_id, path, page)  # checks the source too
        key = (doc_id, page, width)
        with self._lock:
            cached = self._images.get(key)
            if cached is not None:
                self._images.move_to_end(key)
                return cached
        png = self._isolated(render_page, path, page, zoom_for(geometry, width, self.max_px))
        with self._lock:
            self.renders += 1
            if key not in self._images and len(png) <= self.cache_bytes:
                self._images[key] = png
                self._held += len(png)
                while self._held > self.cache_bytes:
                    _, dropped = self._images.popitem(last=False)
                    self._held -= len(dropped)
        return png

    @staticmethod
    def _isolated(fn, *args):
        try:
            return run_isolated(fn, *args, timeout_s=RENDER_TIMEOUT_S, memory_mb=RENDER_MEMORY_MB)
        except Isolated as exc:
            raise RenderFailed(f"MuPDF could not render the page ({exc.reason[:120]})") from None


def is_pdf_path(uri: str) -> bool:
    """A document's uri names a file (a PDF), not a passage of a corpus file (``file#id``)."""
    return "#" not in uri and Path(uri).suffix.lower() == ".pdf"
