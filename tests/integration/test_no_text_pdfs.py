"""PDFs without any text, with OCR on: a PDF of blank pages (nothing for OCR to read) and a scan
of blank pages (OCR reads them and finds nothing). Each is left ``needs_ocr`` with a message
that says what was done — never "needs OCR" when OCR was on — and the next run with the same
build does not read them again. A real paper beside them is indexed as usual."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from bookindex.operators.config import BookindexConfig
from bookindex.operators.eval.hostile_corpus import blank_pages
from bookindex.operators.eval.ocr_quality import image_only_pdf
from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, FAILURES

PAPER = "mmlongbench/documents/2303.05039v2.pdf"


@pytest.fixture(scope="module")
def runs(ray_session, shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("no_text")
    corpus = root / "corpus"
    corpus.mkdir()
    (corpus / "blank.pdf").write_bytes(blank_pages(3))
    (root / "blank2.pdf").write_bytes(blank_pages(2))
    image_only_pdf(str(root / "blank2.pdf"), str(corpus / "scanned_blank.pdf"), dpi=100)
    (corpus / "paper.pdf").write_bytes((shared_data / PAPER).read_bytes())
    config = BookindexConfig(index={"enrich": False, "ocr": True})
    out = root / "index"
    first = run_index([str(corpus)], out, config)
    second = run_index([str(corpus)], out, config)
    docs = pl.from_arrow(lance_store.read_table(out, DOCUMENTS))
    failures = pl.from_arrow(lance_store.read_table(out, FAILURES))
    return first, second, docs, failures


def _row(frame: pl.DataFrame, name: str) -> dict:
    """The one row of ``frame`` whose file is ``name``."""
    (found,) = [r for r in frame.iter_rows(named=True) if Path(r["uri"]).name == name]
    return found


def test_blank_pages_say_there_was_nothing_for_ocr_to_read(runs):
    _, _, docs, failures = runs
    doc = _row(docs, "blank.pdf")
    assert (doc["status"], doc["ocr_pages"]) == ("needs_ocr", 0)
    failure = _row(failures, "blank.pdf")
    assert failure["stage"] == "ocr"
    assert "needs OCR" not in failure["error"]
    assert failure["error"] == (
        "no text: none of its 3 page(s) has a text layer or a page-sized image for OCR to "
        "read (blank pages)"
    )


def test_a_scan_of_blank_pages_says_ocr_read_them_and_found_no_text(runs):
    _, _, docs, failures = runs
    doc = _row(docs, "scanned_blank.pdf")
    assert doc["status"] == "needs_ocr" and doc["n_nodes"] > 0  # its pages as image nodes
    failure = _row(failures, "scanned_blank.pdf")
    assert failure["stage"] == "ocr"
    assert failure["error"] == "no text found: OCR read 2 of its 2 page(s) and found no text"


def test_the_same_build_does_not_read_them_again_and_the_paper_is_indexed(runs):
    first, second, docs, _ = runs
    assert (first.ok, first.needs_ocr, first.failed) == (1, 2, 0)
    assert (second.skipped, second.ok, second.needs_ocr) == (3, 0, 0)
    assert _row(docs, "paper.pdf")["status"] == "ok"
