"""Bad input: every broken file gets a clear failure row or status, nothing else is lost, the
job exits 0 with a summary (non-zero under --strict)."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pymupdf
import pytest

from bookindex.jobs import index_corpus
from bookindex.pipelines.store import lance_store
from bookindex.pipelines.store.schemas import DOCUMENTS, FAILURES, NODES

ZERO_PAGE_PDF = (
    b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"
)


def _build_bad_corpus(root: Path, good: Path) -> dict[str, Path]:
    root.mkdir()
    data = good.read_bytes()
    files = {
        "good": root / "good.pdf",
        "corrupt": root / "corrupt.pdf",
        "truncated": root / "truncated.pdf",
        "encrypted": root / "encrypted.pdf",
        "zero_pages": root / "zero_pages.pdf",
        "not_pdf": root / "notes.pdf",
        "empty_file": root / "empty.pdf",
        "image_only": root / "scanned.pdf",
    }
    shutil.copy(good, files["good"])
    files["corrupt"].write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 40)
    files["truncated"].write_bytes(data[: len(data) // 3])
    with pymupdf.open(good) as doc:
        doc.save(
            files["encrypted"],
            encryption=pymupdf.PDF_ENCRYPT_AES_256,
            user_pw="secret",
            owner_pw="owner",
        )
        scanned = pymupdf.open()
        for page in list(doc)[1:3]:
            out = scanned.new_page(width=page.rect.width, height=page.rect.height)
            out.insert_image(out.rect, pixmap=page.get_pixmap(dpi=40))
        scanned.save(files["image_only"])
    files["zero_pages"].write_bytes(ZERO_PAGE_PDF)
    files["not_pdf"].write_text("Meeting notes, not a PDF at all.\n" * 20)
    files["empty_file"].write_bytes(b"")
    return files


@pytest.fixture(scope="module")
def bad_run(ray_session, sample_corpus, tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    files = _build_bad_corpus(root / "corpus", sample_corpus / "sample_01.pdf")
    empty_dir = root / "nothing_here"
    empty_dir.mkdir()
    out = root / "index"
    code = index_corpus.main(
        [str(root / "corpus"), str(empty_dir), "--out", str(out), "--no-enrich", "--no-ocr"]
    )
    return files, empty_dir, out, code


def test_job_exits_zero_and_indexes_the_good_file(bad_run):
    files, _, out, code = bad_run
    assert code == 0
    docs = pl.from_arrow(lance_store.read_table(out, DOCUMENTS))
    good = docs.filter(pl.col("uri") == str(files["good"].resolve())).row(0, named=True)
    assert good["status"] == "ok" and good["n_sections"] > 10
    nodes = pl.from_arrow(lance_store.read_table(out, NODES))
    assert nodes.filter(pl.col("doc_id") == good["doc_id"]).height > 100


@pytest.mark.parametrize(
    ("name", "stage", "message"),
    [
        ("corrupt", "open", "corrupt or unreadable PDF"),
        ("encrypted", "open", "encrypted PDF: a password is required"),
        ("zero_pages", "open", "PDF has no pages"),
        ("not_pdf", "open", "not a PDF"),
        ("empty_file", "open", "empty file (0 bytes)"),
        ("image_only", "ocr", "no text layer: needs OCR"),
    ],
)
def test_each_bad_file_has_a_failure_row_with_stage_and_message(bad_run, name, stage, message):
    files, _, out, _ = bad_run
    failures = pl.from_arrow(lance_store.read_table(out, FAILURES))
    mine = failures.filter(pl.col("uri") == str(files[name].resolve()))
    assert mine.height == 1, mine
    row = mine.row(0, named=True)
    assert row["stage"] == stage
    assert message in row["error"]
    docs = pl.from_arrow(lance_store.read_table(out, DOCUMENTS))
    status = docs.filter(pl.col("uri") == str(files[name].resolve()))["status"].to_list()
    assert status == (["needs_ocr"] if name == "image_only" else ["failed"])


def test_image_only_pdf_keeps_its_pages_as_image_nodes_for_the_vlm_stage(bad_run):
    files, _, out, _ = bad_run
    docs = pl.from_arrow(lance_store.read_table(out, DOCUMENTS))
    doc_id = docs.filter(pl.col("uri") == str(files["image_only"].resolve()))["doc_id"][0]
    nodes = pl.from_arrow(lance_store.read_table(out, NODES))
    images = nodes.filter((pl.col("doc_id") == doc_id) & (pl.col("kind") == "image"))
    assert sorted(images["page_start"]) == [1, 2]


def test_truncated_pdf_is_recorded_as_repaired_and_indexed_as_far_as_readable(bad_run):
    files, _, out, _ = bad_run
    failures = pl.from_arrow(lance_store.read_table(out, FAILURES))
    mine = failures.filter(pl.col("uri") == str(files["truncated"].resolve()))
    assert "repaired" in " ".join(mine["error"])
    docs = pl.from_arrow(lance_store.read_table(out, DOCUMENTS))
    assert docs.filter(pl.col("uri") == str(files["truncated"].resolve())).height == 1


def test_empty_directory_is_a_discover_failure(bad_run):
    _, empty_dir, out, _ = bad_run
    failures = pl.from_arrow(lance_store.read_table(out, FAILURES))
    row = failures.filter(pl.col("uri") == str(empty_dir.resolve())).row(0, named=True)
    assert (row["stage"], row["error"]) == ("discover", "no PDF files found")


def test_strict_exits_non_zero_and_rerun_repeats_nothing(bad_run):
    files, empty_dir, out, _ = bad_run
    before = lance_store.read_table(out, FAILURES).num_rows
    # the empty directory beside a file to index: its failure row again (replaced, not added)
    inputs = [str(empty_dir), str(files["good"])]
    code = index_corpus.main([*inputs, "--out", str(out), "--strict", "--no-enrich"])
    assert code == 1
    assert lance_store.read_table(out, FAILURES).num_rows == before
    # alone it names nothing to index: a usage error before any work, nothing written
    code = index_corpus.main([str(empty_dir), "--out", str(out), "--strict", "--no-enrich"])
    assert code == 2
    assert lance_store.read_table(out, FAILURES).num_rows == before
    assert (
        index_corpus.main([str(files["good"]), "--out", str(out), "--strict", "--no-enrich"]) == 0
    )
