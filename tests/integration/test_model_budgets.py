"""The model-backed stages' per-document budget (``index.model_timeout_s``): real PDFs through
the index job, a budget that only one document's model work cannot meet. That document becomes a
``failed`` row with ``timed out after N s`` in its stage; the good documents of the same run are
indexed. (The crash and exception cases of the same mechanism: tests/unit/pipelines/
test_model_host.py.)

The budgets are one stage's work on one document (or page), models loaded beforehand: OCR of a
200-dpi page takes seconds of CPU (0.19–0.23 pages per CPU-second, docs/results.md), far past 0.5 s.
Enrich (offline models) costs about a + b·nodes: measured on this 2-core machine, a 3-page paper
or report (~40–60 nodes) takes 1.5 s idle-ish and 4–8 s under load 10–40, 150 book pages (1,125
nodes) 52 s under load 10, spaCy alone ~3 ms a node. The stalled document is three HiPS books in
one PDF (1,550 pages, ~10,000 nodes: a minute or more even on an idle machine) against a
15 s budget a document; the 3-page documents took 10 s under load 25."""

from __future__ import annotations

import polars as pl
import pymupdf
import pytest

from bookindex.jobs import index_corpus
from bookindex.operators.eval.ocr_quality import image_only_pdf, page_subset_pdf
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, FAILURES, NODES

BOOK = (
    "hips/PDFs/climate-change-and-international-shipping-the-regulatory-framework-for-the-"
    "reduction-of-greenhouse-gas-emissions.pdf"
)
LONG_BOOKS = [  # the three longest HiPS books: 635 + 498 + 417 pages
    "hips/PDFs/access-controlled-the-shaping-of-power-rights-and-rule-in-cyberspace.pdf",
    BOOK,
    "hips/PDFs/advancing-equality-how-constitutional-rights-can-make-a-difference-worldwide.pdf",
]
PAPER = "mmlongbench/documents/2303.05039v2.pdf"
REPORT = "docugami/nih-clinical-trial-protocols/data/v1/docs/NCT06150378_Prot_SAP_000.pdf"


def _tables(out) -> dict[str, pl.DataFrame]:
    return {t: pl.from_arrow(lance_store.read_table(out, t)) for t in (DOCUMENTS, NODES, FAILURES)}


def _by_name(tables) -> dict[str, dict]:
    return {r["uri"].rsplit("/", 1)[-1]: r for r in tables[DOCUMENTS].iter_rows(named=True)}


@pytest.fixture(scope="module")
def corpus(shared_data, tmp_path_factory):
    root = tmp_path_factory.mktemp("model_budgets")
    good = root / "good"
    good.mkdir()
    page_subset_pdf(str(shared_data / PAPER), str(good / "paper.pdf"), [1, 2, 3])
    page_subset_pdf(str(shared_data / REPORT), str(good / "report.pdf"), [1, 2, 3])
    page_subset_pdf(str(shared_data / BOOK), str(root / "book_text.pdf"), [420, 421])
    return root, good


def test_a_page_whose_ocr_runs_past_its_budget_fails_its_document_alone(ray_session, corpus):
    root, good = corpus
    scans = root / "ocr_corpus"
    scans.mkdir()
    image_only_pdf(str(root / "book_text.pdf"), str(scans / "scanned.pdf"), dpi=200)
    for name in ("paper.pdf", "report.pdf"):
        (scans / name).write_bytes((good / name).read_bytes())
    out = root / "ocr_index"
    argv = [str(scans), "--out", str(out), "--no-enrich", "--set", "index.model_timeout_s=0.5"]
    assert index_corpus.main(argv) == 0
    tables = _tables(out)
    docs = _by_name(tables)
    assert docs["scanned.pdf"]["status"] == "failed"
    assert docs["scanned.pdf"]["error"] == "timed out after 0.5 s"
    failure = tables[FAILURES].filter(pl.col("doc_id") == docs["scanned.pdf"]["doc_id"])
    assert failure["stage"].to_list() == ["ocr"]
    assert failure["error"].to_list() == ["timed out after 0.5 s"]
    for name in ("paper.pdf", "report.pdf"):
        assert docs[name]["status"] == "ok" and docs[name]["n_nodes"] > 5
        assert tables[NODES].filter(pl.col("doc_id") == docs[name]["doc_id"]).height > 5
    assert tables[NODES].filter(pl.col("doc_id") == docs["scanned.pdf"]["doc_id"]).height == 0


def test_a_document_whose_enrich_runs_past_its_budget_fails_alone(ray_session, corpus, shared_data):
    root, good = corpus
    mixed = root / "enrich_corpus"
    mixed.mkdir()
    with pymupdf.open() as joined:
        for name in LONG_BOOKS:
            with pymupdf.open(shared_data / name) as book:
                joined.insert_pdf(book)
        joined.save(mixed / "book.pdf")
    for name in ("paper.pdf", "report.pdf"):
        (mixed / name).write_bytes((good / name).read_bytes())
    out = root / "enrich_index"
    argv = [str(mixed), "--out", str(out), "--no-ocr", "--set", "index.model_timeout_s=15"]
    argv += ["--set", "index.model_s_per_node=0"]
    assert index_corpus.main(argv) == 0
    tables = _tables(out)
    docs = _by_name(tables)
    book = docs["book.pdf"]
    assert (book["status"], book["error"]) == ("failed", "timed out after 15 s")
    failure = tables[FAILURES].filter(pl.col("doc_id") == book["doc_id"])
    assert failure["stage"].to_list() == ["enrich"]
    assert tables[NODES].filter(pl.col("doc_id") == book["doc_id"]).height == 0
    for name in ("paper.pdf", "report.pdf"):  # enriched: every node has its vector
        assert docs[name]["status"] == "ok"
        nodes = tables[NODES].filter(pl.col("doc_id") == docs[name]["doc_id"])
        assert nodes.height > 5 and nodes["vector"].null_count() == 0
