"""Scanned PDFs through the index job: an image-only PDF made from a real book, and a real paper
with one page replaced by its scan. A first run with OCR off leaves the scan ``needs_ocr``; the
next run (OCR on, the default) reads it again and indexes the OCR'd text like any other: a
heading tree, paragraphs with coordinates, vectors and entities."""

from __future__ import annotations

import json

import polars as pl
import pymupdf
import pytest

from bookindex.jobs import index_corpus
from bookindex.operators.eval.heading_gold import title_similarity
from bookindex.operators.eval.ocr_quality import image_only_pdf, normalize_text, page_subset_pdf
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, ENTITIES, FAILURES, MENTIONS, NODES

BOOK = (
    "hips/PDFs/climate-change-and-international-shipping-the-regulatory-framework-for-the-"
    "reduction-of-greenhouse-gas-emissions.pdf"
)
# "7.5.2.4 Proposed Mechanisms ..." and "7.5.2.4.1 ..." on 422, "7.5.2.4.2"/"7.5.2.4.3" on 424
# (fewer pages leave the text layer's own tree empty too: too little to tell body from title)
BOOK_PAGES = [422, 423, 424]
PAPER = "mmlongbench/documents/2303.05039v2.pdf"


def _mixed_pdf(src: str, dst: str, scan_of: str) -> None:
    """Pages 1 and 3 of the paper as they are, page 2 as its 200-dpi scan."""
    with pymupdf.open(src) as paper, pymupdf.open(scan_of) as scan, pymupdf.open() as out:
        out.insert_pdf(paper, from_page=0, to_page=0)
        out.insert_pdf(scan, from_page=0, to_page=0)
        out.insert_pdf(paper, from_page=2, to_page=2)
        out.save(dst)


def _tables(out) -> dict[str, pl.DataFrame]:
    names = (DOCUMENTS, NODES, FAILURES, ENTITIES, MENTIONS)
    return {t: pl.from_arrow(lance_store.read_table(out, t)) for t in names}


@pytest.fixture(scope="module")
def runs(ray_session, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("ocr_index")
    first, second = root / "first", root / "corpus"
    first.mkdir()
    second.mkdir()
    book_text = str(root / "book_text.pdf")
    page_subset_pdf(str(shared_data / BOOK), book_text, BOOK_PAGES)
    image_only_pdf(book_text, str(first / "scanned_book.pdf"), dpi=200)
    page_subset_pdf(str(shared_data / PAPER), str(root / "paper_p2.pdf"), [2])
    image_only_pdf(str(root / "paper_p2.pdf"), str(root / "paper_p2_scan.pdf"), dpi=200)
    _mixed_pdf(str(shared_data / PAPER), str(second / "paper.pdf"), str(root / "paper_p2_scan.pdf"))
    (second / "scanned_book.pdf").write_bytes((first / "scanned_book.pdf").read_bytes())
    out = root / "index"
    assert index_corpus.main([str(first), "--out", str(out), "--no-ocr", "--no-enrich"]) == 0
    before = _tables(out)
    assert index_corpus.main([str(second), "--out", str(out)]) == 0
    with pymupdf.open(book_text) as doc:
        book_words = [normalize_text(p.get_text()) for p in doc]
    with pymupdf.open(shared_data / PAPER) as doc:
        paper_page2 = normalize_text(doc[1].get_text())
    return before, _tables(out), book_words, paper_page2


def _doc(tables, name: str) -> dict:
    docs = tables[DOCUMENTS].filter(pl.col("uri").str.ends_with(name))
    assert docs.height == 1, docs
    return docs.row(0, named=True)


def test_with_ocr_off_a_scan_is_left_needs_ocr(runs):
    before, _, _, _ = runs
    book = _doc(before, "scanned_book.pdf")
    assert (book["status"], book["ocr_pages"]) == ("needs_ocr", 0)
    ocr_rows = before[FAILURES].filter(pl.col("doc_id") == book["doc_id"])
    assert ocr_rows["stage"].to_list() == ["ocr"]


def test_the_next_run_reads_the_needs_ocr_document_and_replaces_its_rows(runs):
    before, after, _, _ = runs
    book = _doc(after, "scanned_book.pdf")
    assert book["doc_id"] == _doc(before, "scanned_book.pdf")["doc_id"]
    assert (book["status"], book["ocr_pages"], book["n_pages"]) == ("ok", 3, 3)
    assert after[FAILURES].filter(pl.col("doc_id") == book["doc_id"]).height == 0
    nodes = after[NODES].filter(pl.col("doc_id") == book["doc_id"])
    assert nodes.filter(pl.col("kind") == "image").height == 0  # the page images gave way


def test_ocr_is_timed_as_a_stage_of_its_own(runs):
    """A document's pages read by OCR count under ``ocr`` in its stage timings, its text
    ranges under ``parse``."""
    _, after, _, _ = runs
    book = json.loads(_doc(after, "scanned_book.pdf")["stage_timings"])
    paper = json.loads(_doc(after, "paper.pdf")["stage_timings"])
    assert book["ocr"] > 0 and paper["ocr"] > 0 and paper["parse"] > 0
    # three scanned pages take OCR longer than parsing two pages of text
    assert book["ocr"] > paper["parse"]


def test_the_scanned_book_gets_its_heading_tree(runs):
    _, after, _, _ = runs
    book = _doc(after, "scanned_book.pdf")
    nodes = after[NODES].filter(pl.col("doc_id") == book["doc_id"])
    sections = nodes.filter(pl.col("kind") == "section")
    titles = sections["title"].to_list()
    wanted = [
        "7.5.2.4 Proposed Mechanisms for the Selected Market-Based Measure",
        "7.5.2.4.1 Overview of the Add-on RM Built into a Global GHG Fund",
        "7.5.2.4.3 Application Threshold of the Scheme",
    ]
    for title in wanted:
        assert max(title_similarity(title, t) for t in titles) >= 0.8, titles
    assert book["n_sections"] == sections.height >= 3


def test_ocr_paragraphs_have_coordinates_text_and_vectors(runs):
    _, after, book_words, _ = runs
    book = _doc(after, "scanned_book.pdf")
    nodes = after[NODES].filter((pl.col("doc_id") == book["doc_id"]) & (pl.col("kind") == "text"))
    assert nodes.height >= 4
    for row in nodes.iter_rows(named=True):
        x0, y0, x1, y1 = row["bbox"]
        assert 0 <= x0 < x1 and 0 <= y0 < y1 and row["page_start"] in (1, 2, 3)
        assert row["vector"] is not None and len(row["vector"]) == 384
        assert row["font_size"] > 0
    # the words OCR read are the page's words: most of the 6+ letter words of the text layer
    ocr_text = normalize_text(" ".join(nodes["text"].to_list()))
    long_words = {w for page in book_words for w in page.split() if len(w) >= 6 and w.isalpha()}
    found = sum(w in ocr_text for w in long_words)
    assert found >= 0.9 * len(long_words), (found, len(long_words))


def test_entities_are_extracted_from_ocr_text(runs):
    _, after, book_words, _ = runs
    book = _doc(after, "scanned_book.pdf")
    mentions = after[MENTIONS].filter(pl.col("doc_id") == book["doc_id"])
    assert mentions.height >= 3
    names = after[ENTITIES].filter(pl.col("entity_id").is_in(mentions["entity_id"]))["name"]
    text_layer = " ".join(book_words)
    # named entities of the book's own text (as its text layer spells them), not OCR noise
    assert sum(name in text_layer for name in names.to_list()) >= 3, names.to_list()


def test_an_image_only_page_inside_a_text_pdf_is_read(runs):
    _, after, _, paper_page2 = runs
    paper = _doc(after, "paper.pdf")
    assert (paper["status"], paper["ocr_pages"], paper["n_pages"]) == ("ok", 1, 3)
    nodes = after[NODES].filter(pl.col("doc_id") == paper["doc_id"])
    page2 = normalize_text(" ".join(nodes.filter(pl.col("page_start") == 2)["text"].to_list()))
    words = [w for w in paper_page2.split() if len(w) >= 6 and w.isalpha()]
    assert sum(w in page2 for w in words) >= 0.9 * len(words)
    assert nodes.filter(pl.col("page_start") == 1).height > 0  # text pages parsed as before
