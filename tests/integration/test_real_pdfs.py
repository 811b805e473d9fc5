"""The indexing job on real PDFs from ../shared/data: a book against its human TOC, a paper's
tables and figures, outlines from the pypdf/pikepdf fixtures, a syllabus, an OCR'd scan,
and a byte-identical index from a second run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from bookindex.operators.config import BookindexConfig, IndexConfig
from bookindex.operators.eval.heading_gold import load_hips_gold, score
from bookindex.pipelines.index_pipeline import run_index
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, NODES

HIPS_BOOK = "aegis-or-achilles-heel-the-dilemma-of-homology-in-biopatents-in-the-wake-of-novozymes"
PAPER = "mmlongbench/documents/2303.05039v2.pdf"


@pytest.fixture(scope="module")
def real_corpus(shared_data, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("real")
    picks = [
        f"hips/PDFs/{HIPS_BOOK}.pdf",
        PAPER,
        "pdf_fixtures/pikepdf/outlines.pdf",
        "pdf_fixtures/pypdf/pdflatex-outline.pdf",
        "pdf_fixtures/pypdf/Seige_of_Vicksburg_Sample_OCR.pdf",
        "syllabusqa/syllabi/pdf/101-f22-syll.pdf",
    ]
    for rel in picks:
        shutil.copy(shared_data / rel, root / Path(rel).name)
    return root


@pytest.fixture(scope="module")
def real_index(ray_session, real_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("real_index")
    summary = run_index(
        [str(real_corpus)], out, BookindexConfig(index=IndexConfig(pages_per_task=16, enrich=False))
    )
    docs = pl.from_arrow(lance_store.read_table(out, DOCUMENTS))
    nodes = pl.from_arrow(lance_store.read_table(out, NODES))
    return out, summary, docs, nodes


def _doc(docs: pl.DataFrame, nodes: pl.DataFrame, name: str) -> tuple[dict, pl.DataFrame]:
    doc = docs.filter(pl.col("uri").str.ends_with(name)).row(0, named=True)
    return doc, nodes.filter(pl.col("doc_id") == doc["doc_id"]).sort("order")


def test_all_real_documents_index(real_index):
    _, summary, docs, _ = real_index
    assert summary.failed == 0 and summary.ok == 6
    assert set(docs["status"]) == {"ok"}


def test_book_sections_against_the_human_toc(real_index):
    """A 72-page book split over 5 page ranges: its headings score like the benchmark says
    and the tree nests them (chapters hold sections)."""
    out, _, docs, nodes = real_index
    doc, mine = _doc(docs, nodes, f"{HIPS_BOOK}.pdf")
    sections = mine.filter(pl.col("kind") == "section")
    pred = list(zip(sections["level"], sections["title"], sections["page_start"], strict=True))
    result = score(pred, load_hips_gold(HIPS_BOOK))
    assert result["precision"] >= 0.9 and result["recall"] >= 0.6, result
    assert doc["outline_used"] is True
    toc = json.loads(doc["toc"])
    assert any(entry["children"] for entry in toc[1:])  # nested, not flat
    assert mine["page_end"].max() == doc["n_pages"] == 72
    plan = json.loads((out / "stats.json").read_text())["stages"]["plan"]
    assert plan["ranges"] >= 5  # the book was split (72 pages at 16 per task), not whole


def test_paper_tables_and_figures(real_index):
    _, _, docs, nodes = real_index
    _, mine = _doc(docs, nodes, Path(PAPER).name)
    tables = mine.filter(pl.col("kind") == "table")
    assert tables.height >= 3
    assert all(len(t) > 20 for t in tables["text"])
    assert mine.filter(pl.col("kind") == "image").height >= 5
    captions = mine.filter(pl.col("kind") == "caption")["text"].to_list()
    assert any(c.startswith("Table") for c in captions)
    assert any(c.startswith(("Figure", "Fig")) for c in captions)


def test_nested_outline_gives_levels(real_index):
    _, _, docs, nodes = real_index
    _, mine = _doc(docs, nodes, "outlines.pdf")
    sections = mine.filter(pl.col("kind") == "section")
    # Outline entry "One-B-I" (level 3) is found in the text, printed as "One B I.": the
    # heading is that block, named by its entry (sections.entry_title), under "One-B"
    assert ("One-B-I", 3) in list(zip(sections["title"], sections["level"], strict=True))
    by_id = {r["node_id"]: r for r in mine.iter_rows(named=True)}
    deep = sections.filter(pl.col("title") == "One-B-I").row(0, named=True)
    assert by_id[deep["parent_id"]]["title"] == "One-B"


def test_scanned_document_with_ocr_layer_has_text(real_index):
    _, _, docs, nodes = real_index
    doc, mine = _doc(docs, nodes, "Seige_of_Vicksburg_Sample_OCR.pdf")
    assert doc["status"] == "ok"
    assert mine.filter(pl.col("kind") == "text")["n_tokens"].sum() > 300


def test_same_input_gives_the_same_index(real_index, real_corpus, tmp_path):
    out, _, _, nodes = real_index
    again = tmp_path / "again"
    run_index(
        [str(real_corpus)],
        again,
        BookindexConfig(index=IndexConfig(pages_per_task=64, enrich=False)),
    )
    second = pl.from_arrow(lance_store.read_table(again, NODES))
    columns = [c for c in nodes.columns if c != "summary"]
    assert nodes.sort("node_id").select(columns).equals(second.sort("node_id").select(columns))
