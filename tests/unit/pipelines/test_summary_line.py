"""The index job's summary line: pages/s for PDFs, passages/s for passage corpora."""

from __future__ import annotations

from bookindex.pipelines.run_stats import summary_line

BASE = {"ok": 0, "failed": 0, "skipped": 0, "needs_ocr": 0, "nodes": 0, "entities": 0}


def test_a_passage_corpus_reports_passages_per_second():
    line = summary_line({"summary": dict(BASE, ok=1890, pages=0, passages=1890, seconds=145.0)})
    assert "passages=1890" in line and line.endswith("13.0 passages/s")
    assert "pages/s" not in line


def test_pdfs_report_pages_per_second_and_both_when_mixed():
    pdfs = summary_line({"summary": dict(BASE, ok=3, pages=300, seconds=10.0)})
    assert pdfs.endswith("30.0 pages/s") and "passages" not in pdfs
    mixed = summary_line({"summary": dict(BASE, ok=4, pages=300, passages=50, seconds=10.0)})
    assert mixed.endswith("30.0 pages/s, 5.0 passages/s")
