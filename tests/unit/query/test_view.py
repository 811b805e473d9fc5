"""The viewer's data (operators/view) on the in-memory index of the real paper (this folder's
conftest) and on the sample corpus's PDFs: the document view's tree is the stored TOC, a page
view holds every node starting on the page with its stored box, page images are rendered within
their cap and cached, a moved or changed PDF is a clear error, a rotated page's boxes land on
the text as rendered, and the running heads are found as the index job drops them."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from bookindex.operators.kinds import ROOT
from bookindex.operators.parsing.probe import identify
from bookindex.operators.view.pages import (
    NoSuchPage,
    PageImages,
    SourceChanged,
    SourceMissing,
    read_geometry,
    render_page,
    zoom_for,
)
from bookindex.operators.view.running_heads import RunningHeads, find_furniture
from bookindex.operators.view.views import document_view, page_view, section_view


def _png_size(png: bytes) -> tuple[int, int]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", png[16:24])


def test_the_document_view_is_the_stored_toc_with_each_heading_s_node(index, doc):
    view = document_view(index, doc)
    toc = index.documents[doc].toc
    assert [(t["sec_id"], t["level"], t["title"], t["page"]) for t in view["tree"]] == [
        (t["sec_id"], t["level"], t["title"], t["page"]) for t in toc
    ]
    for entry in view["tree"]:
        position = index.position(entry["node_id"])
        assert index.sec_id[position] == entry["sec_id"] and index.kind[position] in (
            "root",
            "section",
        )
    tables = [f for f in view["figures"] if f["kind"] == "table"]
    assert len(tables) >= 6  # the paper's Tables 1-6
    assert all(f["bbox"] and f["page"] >= 1 for f in view["figures"])
    lo, hi = index.doc_range(doc)
    assert view["n_nodes"] == hi - lo and sum(view["kinds"].values()) == hi - lo


def test_a_section_view_is_its_heading_then_its_leaves_in_order(index, doc):
    entry = next(t for t in index.documents[doc].toc if t["level"] == 1)
    view = section_view(index, doc, entry["sec_id"])
    assert view["heading"]["title"] == entry["title"]
    leaves = index.section_leaves(doc, entry["sec_id"])
    assert [n["node_id"] for n in view["nodes"]] == [index.node_ids[p] for p in leaves]
    assert [n["para_idx"] for n in view["nodes"]] == sorted(n["para_idx"] for n in view["nodes"])
    with pytest.raises(KeyError):
        section_view(index, doc, 10_000)


def test_a_page_view_holds_every_node_starting_there_with_its_stored_box(index, doc):
    document = index.documents[doc]
    pages = PageImages()
    for page in range(1, document.n_pages + 1):
        geometry = pages.page_geometry(document.doc_id, document.uri, page)
        view = page_view(index, doc, page, geometry)
        lo, hi = index.doc_range(doc)
        expected = [
            p for p in range(lo, hi) if index.page_start[p] == page and index.kind[p] != ROOT
        ]
        assert [n["node_id"] for n in view["nodes"]] == [index.node_ids[p] for p in expected]
        for node, p in zip(view["nodes"], expected, strict=True):
            stored = index.bbox[p]
            assert node["bbox"] == pytest.approx(stored.tolist(), abs=0.01)
            x0, y0, x1, y1 = node["bbox"]
            assert -1 <= x0 < x1 <= geometry.width + 1 and -1 <= y0 < y1 <= geometry.height + 1
        assert all(n["page"] < page <= n["page_end"] for n in view["continued"])
    with pytest.raises(NoSuchPage):
        pages.page_geometry(document.doc_id, document.uri, document.n_pages + 1)


def test_page_images_stay_within_the_cap_and_are_rendered_once(index, doc):
    document = index.documents[doc]
    pages = PageImages(max_px=900, cache_bytes=8 * 2**20)
    geometry = pages.page_geometry(document.doc_id, document.uri, 1)
    png = pages.image(document.doc_id, document.uri, 1, 600)
    width, height = _png_size(png)
    assert abs(width - 600) <= 1 and abs(height - 600 * geometry.height / geometry.width) <= 2
    assert pages.image(document.doc_id, document.uri, 1, 600) == png and pages.renders == 1
    big = pages.image(document.doc_id, document.uri, 1, 900)  # a portrait page: its height capped
    assert max(_png_size(big)) <= 900 and pages.renders == 2
    for width in (0, 63, 901, 10**9):
        with pytest.raises(ValueError):
            pages.image(document.doc_id, document.uri, 1, width)


def test_a_tall_page_is_capped_on_both_sides(tmp_path):
    pdf = pymupdf.open()
    pdf.new_page(width=100, height=3000)
    pdf.save(tmp_path / "tall.pdf")
    (geometry,) = read_geometry(str(tmp_path / "tall.pdf"))
    png = render_page(str(tmp_path / "tall.pdf"), 1, zoom_for(geometry, 500, 1000))
    width, height = _png_size(png)
    assert height <= 1000 and width <= 40


def test_a_moved_or_changed_pdf_is_a_clear_error_without_its_path(sample_corpus, tmp_path):
    path = tmp_path / "book.pdf"
    shutil.copy(sample_corpus / "sample_00.pdf", path)
    doc_id = identify([str(path)])[0].doc_id
    pages = PageImages()
    assert _png_size(pages.image(doc_id, str(path), 2, 300))[0] == 300
    path.write_bytes(path.read_bytes() + b"\n% changed\n")
    with pytest.raises(SourceChanged) as changed:
        pages.image(doc_id, str(path), 2, 300)  # cached, and still refused: the bytes changed
    assert changed.value.status == 409 and str(tmp_path) not in changed.value.message
    path.unlink()
    with pytest.raises(SourceMissing) as missing:
        pages.geometry(doc_id, str(path))
    assert missing.value.status == 410 and "moved or deleted" in missing.value.message
    assert str(tmp_path) not in missing.value.message


def test_a_rotated_page_s_boxes_land_on_its_text_as_rendered(tmp_path):
    pdf = pymupdf.open()
    page = pdf.new_page(width=400, height=600)
    page.insert_text((60, 100), "Rotated heading", fontsize=24)
    page.set_rotation(90)
    pdf.save(tmp_path / "rotated.pdf")
    with pymupdf.open(tmp_path / "rotated.pdf") as reopened:
        (block,) = [b for b in reopened[0].get_text("dict")["blocks"] if b["type"] == 0]
    (geometry,) = read_geometry(str(tmp_path / "rotated.pdf"))
    assert (geometry.rotation, geometry.width, geometry.height) == (90, 600, 400)
    x0, y0, x1, y1 = geometry.box(block["bbox"])
    png = render_page(str(tmp_path / "rotated.pdf"), 1, 1.0)
    pixmap = pymupdf.Pixmap(png)
    ink = np.frombuffer(pixmap.samples, np.uint8).reshape(pixmap.height, pixmap.width, pixmap.n)
    rows, columns = np.nonzero(ink.min(axis=2) < 128)
    assert x0 - 2 <= columns.min() and columns.max() <= x1 + 2
    assert y0 - 2 <= rows.min() and rows.max() <= y1 + 2


def test_the_running_heads_are_found_as_the_index_job_drops_them(sample_corpus):
    path = sample_corpus / "sample_00.pdf"
    found = find_furniture(str(path))
    with pymupdf.open(path) as pdf:
        title, n_pages, height = pdf.metadata["title"], pdf.page_count, pdf[0].rect.height
    assert 1 not in found  # the title page has neither
    for page in range(2, n_pages + 1):
        kinds = {f["kind"]: f for f in found[page]}
        assert kinds["header"]["text"] == title and kinds["header"]["bbox"][3] < 0.1 * height
        assert kinds["footer"]["text"] == str(page) and kinds["footer"]["bbox"][1] > 0.9 * height
    heads = RunningHeads()
    doc_id = identify([str(path)])[0].doc_id
    assert heads.of(doc_id, str(path)) == found and heads.of(doc_id, str(path)) == found
    assert heads.readings == 1


def test_a_passage_is_no_pdf():
    from bookindex.operators.view.pages import is_pdf_path

    assert not is_pdf_path("/data/corpus.jsonl#p12")
    assert is_pdf_path(str(Path("/data/book.PDF")))
