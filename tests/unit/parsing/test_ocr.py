"""OCR of a rendered real page: text close to the page's own text layer, blocks with boxes and
sizes, spaces and old-style figures put right; the probe finds the pages to read."""

from __future__ import annotations

import pymupdf
import pytest

from bookindex.operators.eval.ocr_quality import (
    edit_distance,
    image_only_pdf,
    page_cer,
    page_subset_pdf,
    text_layer_words,
)
from bookindex.operators.parsing.ocr import (
    OCR_FONT,
    OcrEngine,
    clean_text,
    image_only_pages,
    lines_to_blocks,
    merge_ocr_blocks,
    snap_font_sizes,
)
from bookindex.operators.parsing.parse import parse_pages
from bookindex.operators.parsing.probe import probe_pdf

# A HiPS book page of running text, a section heading and footnotes (not a page the OCR
# constants were set on).
BOOK = "hips/PDFs/women-and-the-un-a-new-history-of-womens-international-human-rights.pdf"
PAGE = 30


@pytest.fixture(scope="module")
def scan(shared_data, tmp_path_factory):
    """The text page, and the same page as an image-only PDF rendered at 200 dpi."""
    root = tmp_path_factory.mktemp("ocr")
    text_pdf, scan_pdf = str(root / "page.pdf"), str(root / "scan.pdf")
    page_subset_pdf(str(shared_data / BOOK), text_pdf, [PAGE])
    image_only_pdf(text_pdf, scan_pdf, dpi=200)
    return text_pdf, scan_pdf


@pytest.fixture(scope="module")
def read(scan):
    """OCR lines of the scanned page (one engine, one page: the slow part, done once)."""
    _, scan_pdf = scan
    engine = OcrEngine(threads=1)
    with pymupdf.open(scan_pdf) as doc:
        from bookindex.operators.parsing.ocr import render_page

        page = doc[0]
        lines = engine.read_lines(render_page(page, 200), 72 / 200)
        return lines, page.rect.width, page.rect.height


def test_ocr_text_of_a_rendered_book_page_is_within_5_percent_cer_of_its_text_layer(scan, read):
    text_pdf, _ = scan
    lines, _, _ = read
    with pymupdf.open(text_pdf) as doc:
        words = text_layer_words(doc[0])
    result = page_cer(words, [(ln.x0, ln.y0, ln.x1, ln.y1, ln.text) for ln in lines])
    assert result.ref_chars > 1500
    assert result.cer <= 0.05, result


def test_ocr_blocks_have_boxes_on_the_page_and_the_body_size_of_the_text_layer(scan, read):
    text_pdf, _ = scan
    lines, width, height = read
    blocks = lines_to_blocks(lines, 1, width, height)
    assert blocks and all(b.font == OCR_FONT and b.kind == "text" for b in blocks)
    assert all(0 <= b.x0 < b.x1 <= width and 0 <= b.y0 < b.y1 <= height for b in blocks)
    assert [b.order for b in blocks] == list(range(len(blocks)))
    paragraphs = [b for b in blocks if b.n_lines >= 3]
    assert paragraphs, "running text comes out as paragraphs, not one block per line"
    with pymupdf.open(text_pdf) as doc:
        spans = [
            s
            for b in doc[0].get_text("dict")["blocks"]
            for ln in b.get("lines", [])
            for s in ln["spans"]
        ]
    body = max(
        {s["size"] for s in spans},
        key=lambda z: sum(len(s["text"]) for s in spans if s["size"] == z),
    )
    longest = max(paragraphs, key=lambda b: len(b.text))
    assert abs(longest.font_size - body) <= 0.15 * body


def test_a_page_image_gives_way_to_the_text_read_from_it(scan, read):
    _, scan_pdf = scan
    lines, width, height = read
    with pymupdf.open(scan_pdf) as doc:
        parsed = parse_pages(doc, 0, 1).blocks
    assert [b.kind for b in parsed] == ["image"]  # the scan: one page-sized image
    merged = merge_ocr_blocks(parsed, lines_to_blocks(lines, 1, width, height))
    assert merged and all(b.kind == "text" for b in merged)


def test_sizes_of_one_font_snap_to_one_size_over_a_document(read):
    lines, width, height = read
    blocks = lines_to_blocks(lines, 1, width, height) + lines_to_blocks(lines, 2, width, height)
    for i, b in enumerate(blocks):  # the same lines, a wobble of ±3 % as OCR gives
        b.font_size = round(b.font_size * (1.03 if i % 2 else 0.97), 1)
    snap_font_sizes(blocks)
    body = [b for b in blocks if b.n_lines >= 3]
    assert len({b.font_size for b in body}) == 1


def test_probe_finds_the_image_only_pages_and_only_those(scan, shared_data):
    text_pdf, scan_pdf = scan
    probe = probe_pdf(scan_pdf)
    assert (probe.status, probe.ocr_pages) == ("needs_ocr", [1])
    assert probe_pdf(text_pdf).ocr_pages == []
    with pymupdf.open(shared_data / "mmlongbench/documents/2303.05039v2.pdf") as doc:
        assert image_only_pages(doc) == []  # a paper with figures: its pages have text


def test_recognised_text_is_made_plain():
    assert clean_text("(2o1o） 365 Phil") == "(2010) 365 Phil"
    assert clean_text("by 202o.81 Besides, a too good o") == "by 2020.81 Besides, a too good o"


def test_edit_distance():
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance("intention", "execution") == 5
    assert edit_distance("", "abc") == 3 and edit_distance("abc", "abc") == 0
