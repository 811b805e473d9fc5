"""The viewer's routes on the Serve application's FastAPI app (``install_viewer``): the page and
its two assets, and the JSON and image endpoints it reads. They answer from the engine replica's
own read model (the index it has open; a reload swaps it) and the index's catalog, in the same
process and behind the same guard as ``/query`` (``pipelines.serve_guard``: the bearer token,
the body limit).

    GET /viewer, /viewer/viewer.js, /viewer/viewer.css      the page (open: it holds no data)
    GET /viewer/api/corpus                                  documents, builds, failure rows,
                                                            the query methods
    GET /viewer/api/docs/{doc_id}                           heading tree, tables and figures
    GET /viewer/api/docs/{doc_id}/sections/{sec_id}         a section's nodes
    GET /viewer/api/docs/{doc_id}/pages/{page}              the page's nodes and boxes
    GET /viewer/api/docs/{doc_id}/pages/{page}/image?width=W    the page as PNG
    GET /viewer/api/docs/{doc_id}/pages/{page}/furniture    running heads and footers

Safe by construction: a document is named by its ``doc_id`` alone, looked up exactly among the
documents of the open index; the file read is the path the index recorded for it, checked
against that doc_id (``operators.view.pages``); no part of a request becomes a path. Pages and
widths out of range are refused (404 / 422) and the image's longest side is capped
(``serve.viewer_max_px``); rendered pages are cached (``serve.viewer_cache_mb``) and sent with
an ETag (a doc_id is the hash of the PDF's bytes: a page image never changes). Error bodies
name the field and the problem, never the input.
"""

# No ``from __future__ import annotations``: FastAPI reads these routes' parameter types.
import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Annotated, Any

from fastapi import FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse, Response

from bookindex.operators.query.read_model import ReadModel
from bookindex.operators.query.registry import METHODS, QUERY
from bookindex.operators.view.pages import PageError, PageImages, is_pdf_path
from bookindex.operators.view.running_heads import RunningHeads
from bookindex.operators.view.views import document_view, page_view, section_view
from bookindex.pipelines.serve_guard import OPEN_PATHS, error_response

# The page and its assets: URL path → (file under static/, media type). Nothing else is served
# from the package, and no request names a file.
ASSETS = {
    "/viewer": ("index.html", "text/html; charset=utf-8"),
    "/viewer/": ("index.html", "text/html; charset=utf-8"),
    "/viewer/viewer.js": ("viewer.js", "text/javascript; charset=utf-8"),
    "/viewer/viewer.css": ("viewer.css", "text/css; charset=utf-8"),
}
assert set(ASSETS) <= OPEN_PATHS, "the viewer's assets must be open paths of the guard"
# The page runs its own script and style only, talks to this server only, and shows images
# made here (blob: URLs of fetched page images); it may not be framed.
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
JSON_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}
MAX_DOC_ID_CHARS = 128
MAX_PAGE = 1_000_000  # a page number beyond any PDF's: refused as a malformed request
DEFAULT_WIDTH = 1000


@dataclass
class ViewerState:
    """What the routes read: the index directory (its catalog), the open read model (a
    callable: a reload swaps it), the page images and the running heads."""

    index_dir: str
    model: Callable[[], ReadModel]
    pages: PageImages
    heads: RunningHeads = field(default_factory=RunningHeads)
    _ids: tuple[int, dict[str, int]] = (0, {})

    def document(self, doc_id: str) -> tuple[ReadModel, int]:
        """The read model and the position of the document whose doc_id is exactly
        ``doc_id``; ``KeyError`` when the open index has none."""
        model = self.model()
        if self._ids[0] != id(model):
            self._ids = (id(model), {d.doc_id: d.position for d in model.documents})
        position = self._ids[1].get(doc_id) if len(doc_id) <= MAX_DOC_ID_CHARS else None
        if position is None:
            raise KeyError(doc_id)
        return model, position


def viewer_state(index_dir: str, model: Callable[[], ReadModel], serve: Any) -> ViewerState:
    """The viewer of a replica from its ``ServeConfig`` (``viewer_max_px``, ``viewer_cache_mb``)."""
    pages = PageImages(max_px=serve.viewer_max_px, cache_bytes=serve.viewer_cache_mb * 2**20)
    return ViewerState(index_dir=index_dir, model=model, pages=pages)


def _asset(name: str) -> bytes:
    return (resources.files(__package__) / "static" / name).read_bytes()


def _json(content: dict) -> JSONResponse:
    return JSONResponse(content, headers=JSON_HEADERS)


def _no_document() -> JSONResponse:
    return error_response(404, "doc_id", "no document with this doc_id in the index")


class _Refused(Exception):
    def __init__(self, response: JSONResponse) -> None:
        self.response = response


def install_viewer(api: FastAPI, state: Callable[[], ViewerState | None]) -> None:
    """Add the viewer's routes to ``api``; ``state()`` is the replica's ``ViewerState`` (None
    while it starts, or with ``serve.viewer`` off: the routes then answer 404)."""

    def asset(body: bytes, media: str) -> Callable[[], Response]:
        def page_asset() -> Response:
            return Response(body, media_type=media, headers=PAGE_HEADERS)

        return page_asset

    for path, (name, media) in ASSETS.items():
        endpoint = asset(_asset(name), media)
        api.add_api_route(path, endpoint, methods=["GET"], include_in_schema=False)

    def current() -> ViewerState:
        found = state()
        if found is None:
            raise _Refused(error_response(404, "viewer", "the viewer is off (serve.viewer)"))
        return found

    def pdf_document(viewer: ViewerState, doc_id: str) -> tuple[ReadModel, int, str, str]:
        try:
            model, doc = viewer.document(doc_id)
        except KeyError:
            raise _Refused(_no_document()) from None
        d = model.documents[doc]
        if not is_pdf_path(d.uri):
            raise _Refused(error_response(404, "doc_id", "this document has no pages (a passage)"))
        return model, doc, d.doc_id, d.uri

    async def guarded(work: Callable[[], Response]) -> Response:
        try:
            return await asyncio.to_thread(work)
        except _Refused as refused:
            return refused.response
        except PageError as exc:
            return error_response(exc.status, "page", exc.message)
        except FileNotFoundError:  # the index directory went away under the server
            return error_response(503, "index", "the index is no longer where it was opened")
        except Exception:
            logging.getLogger("ray.serve").exception("viewer request failed")
            return error_response(500, "viewer", "the viewer failed on this request (server log)")

    DocId = Annotated[str, Path(description="the document's doc_id (sha256 of its bytes)")]
    Page = Annotated[int, Path(ge=1, le=MAX_PAGE, description="1-based page number")]

    @api.get("/viewer/api/corpus", include_in_schema=False)
    async def corpus() -> Response:
        def work() -> Response:
            return _json(corpus_view(current()))

        return await guarded(work)

    @api.get("/viewer/api/docs/{doc_id}", include_in_schema=False)
    async def document(doc_id: DocId) -> Response:
        def work() -> Response:
            try:
                model, doc = current().document(doc_id)
            except KeyError:
                return _no_document()
            return _json(document_view(model, doc))

        return await guarded(work)

    @api.get("/viewer/api/docs/{doc_id}/sections/{sec_id}", include_in_schema=False)
    async def section(doc_id: DocId, sec_id: Annotated[int, Path(ge=0, le=MAX_PAGE)]) -> Response:
        def work() -> Response:
            try:
                model, doc = current().document(doc_id)
            except KeyError:
                return _no_document()
            try:
                return _json(section_view(model, doc, sec_id))
            except KeyError:
                return error_response(404, "sec_id", "the document has no such section")

        return await guarded(work)

    @api.get("/viewer/api/docs/{doc_id}/pages/{page}", include_in_schema=False)
    async def page(doc_id: DocId, page: Page) -> Response:
        def work() -> Response:
            viewer = current()
            model, doc, checked_id, uri = pdf_document(viewer, doc_id)
            geometry = viewer.pages.page_geometry(checked_id, uri, page)
            return _json(page_view(model, doc, page, geometry))

        return await guarded(work)

    @api.get("/viewer/api/docs/{doc_id}/pages/{page}/image", include_in_schema=False)
    async def image(
        request: Request,
        doc_id: DocId,
        page: Page,
        width: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_WIDTH,
    ) -> Response:
        def work() -> Response:
            viewer = current()
            _, _, checked_id, uri = pdf_document(viewer, doc_id)
            try:
                png = viewer.pages.image(checked_id, uri, page, width)
            except ValueError as exc:
                return error_response(422, "width", str(exc))
            tag = f'"{checked_id[:24]}-{page}-{width}"'
            headers = {
                "ETag": tag,
                "Cache-Control": "private, max-age=86400",
                "X-Content-Type-Options": "nosniff",
            }
            if request.headers.get("if-none-match") == tag:
                return Response(status_code=304, headers=headers)
            return Response(png, media_type="image/png", headers=headers)

        return await guarded(work)

    @api.get("/viewer/api/docs/{doc_id}/pages/{page}/furniture", include_in_schema=False)
    async def furniture(doc_id: DocId, page: Page) -> Response:
        def work() -> Response:
            viewer = current()
            _, _, checked_id, uri = pdf_document(viewer, doc_id)
            geometry = viewer.pages.page_geometry(checked_id, uri, page)
            try:
                found = viewer.heads.of(checked_id, uri)
            except RuntimeError as exc:
                return error_response(502, "page", str(exc))
            items = [dict(f, bbox=geometry.box(f["bbox"])) for f in found.get(page, [])]
            return _json({"doc_id": checked_id, "page": page, "furniture": items})

        return await guarded(work)


def corpus_view(viewer: ViewerState) -> dict:
    """Every committed document (failed ones too) with its build in a line, the failure rows,
    and the query methods the ask view offers."""
    from bookindex.pipelines import provenance
    from bookindex.pipelines.store import catalog

    builds = catalog.builds(viewer.index_dir)
    documents = []
    for row in catalog.documents(viewer.index_dir):
        build = builds.get(row["doc_id"])
        documents.append(
            {
                "doc_id": row["doc_id"],
                "name": row["name"],
                "title": row.get("title") or "",
                "status": row.get("status") or "",
                "error": row.get("error") or "",
                "n_pages": row.get("n_pages") or 0,
                "ocr_pages": row.get("ocr_pages") or 0,
                "n_nodes": row.get("n_nodes") or 0,
                "n_sections": row.get("n_sections") or 0,
                "outline_used": bool(row.get("outline_used")),
                "indexed_at": _when(row.get("indexed_at")),
                "build_id": _build_id(build),
                "build": provenance.describe(build),
                "passage": not is_pdf_path(row["uri"]),
            }
        )
    failures = [
        {
            "uri": row.get("uri") or "",
            "doc_id": row.get("doc_id") or "",
            "stage": row.get("stage") or "",
            "error": row.get("error") or "",
            "failed_at": _when(row.get("failed_at")),
        }
        for row in catalog.failures(viewer.index_dir)
    ]
    methods = [{"name": m.name, "description": m.description} for m in METHODS if m.kind == QUERY]
    return {"documents": documents, "failures": failures, "methods": methods}


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else ""


def _build_id(build: str | None) -> str:
    try:
        return str(json.loads(build or "{}").get("id") or "")
    except ValueError:
        return ""
