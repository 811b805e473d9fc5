"""The OCR stage's plan and arguments, without Ray: which pages of a probed real PDF go to OCR,
which ranges still go to the parser, the stage's pool from configuration, and an old
``documents`` table gaining the ``ocr_pages`` column."""

from __future__ import annotations

import lance
import pyarrow as pa
import pymupdf

from bookindex.jobs.index_corpus import build_parser, flag_values
from bookindex.operators.config import config_from_args
from bookindex.operators.eval.ocr_quality import image_only_pdf, page_subset_pdf
from bookindex.pipelines.ocr_stage import ocr_tasks, text_ranges
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, documents_schema
from bookindex.pipelines.structure_stage import probe_document

PAPER = "mmlongbench/documents/2303.05039v2.pdf"


def _mixed(shared_data, tmp_path) -> str:
    """Pages 1-3 of a real paper with page 2 replaced by its scan."""
    page_subset_pdf(str(shared_data / PAPER), str(tmp_path / "p2.pdf"), [2])
    image_only_pdf(str(tmp_path / "p2.pdf"), str(tmp_path / "p2_scan.pdf"), dpi=72)
    dst = str(tmp_path / "mixed.pdf")
    with (
        pymupdf.open(shared_data / PAPER) as paper,
        pymupdf.open(tmp_path / "p2_scan.pdf") as scan,
        pymupdf.open() as out,
    ):
        out.insert_pdf(paper, from_page=0, to_page=0)
        out.insert_pdf(scan)
        out.insert_pdf(paper, from_page=2, to_page=2)
        out.save(dst)
    return dst


def test_the_scanned_page_goes_to_ocr_and_the_text_pages_to_the_parser(shared_data, tmp_path):
    uri = _mixed(shared_data, tmp_path)
    probed = probe_document({"doc_id": "d", "uri": uri, "size": 1})
    assert probed["status"] == "ok" and probed["ocr_pages"] == "[2]"
    pages = ocr_tasks([probed])
    assert [(r["start"], r["stop"], r["ocr"]) for r in pages] == [(1, 2, True)]
    ranges = text_ranges(probed, pages_per_task=1)
    assert [(r["start"], r["stop"], r["ocr"]) for r in ranges] == [(0, 1, False), (2, 3, False)]
    assert [(r["start"], r["stop"]) for r in text_ranges(probed, 64)] == [(0, 3)]
    # 0: a document that is not split is parsed as one range, scanned pages and all
    assert [(r["start"], r["stop"]) for r in text_ranges(probed, 0)] == [(0, 3)]
    failed = dict(probed, status="failed")
    assert ocr_tasks([failed]) == []


def test_no_ocr_flag_turns_ocr_off():
    args = build_parser().parse_args(["in", "--out", "x", "--no-ocr"])
    assert config_from_args(args, flag_values(args)).index.ocr is False
    args = build_parser().parse_args(["in", "--out", "x"])
    assert config_from_args(args, flag_values(args)).index.ocr is True


def test_an_old_documents_table_gains_the_ocr_pages_column(tmp_path):
    old_schema = pa.schema([f for f in documents_schema if f.name != "ocr_pages"])
    row = {f.name: None for f in old_schema} | {"doc_id": "old", "uri": "a.pdf", "status": "ok"}
    lance.write_dataset(
        pa.Table.from_pylist([row], schema=old_schema), str(tmp_path / "documents.lance")
    )
    new = {f.name: None for f in documents_schema} | {
        "doc_id": "new",
        "status": "ok",
        "ocr_pages": 3,
    }
    lance_store.append(tmp_path, DOCUMENTS, pa.Table.from_pylist([new], schema=documents_schema))
    table = lance_store.read_table(tmp_path, DOCUMENTS, ["doc_id", "ocr_pages"]).to_pylist()
    assert sorted(table, key=lambda r: r["doc_id"]) == [
        {"doc_id": "new", "ocr_pages": 3},
        {"doc_id": "old", "ocr_pages": None},
    ]
