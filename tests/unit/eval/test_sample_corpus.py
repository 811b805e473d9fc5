"""Tests for the deterministic sample-corpus generator (operators.eval.sample_corpus)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymupdf
import pytest

from bookindex.jobs.make_sample_corpus import main
from bookindex.operators.eval.sample_corpus import build_sample_corpus

HEADING_SIZES = {20.0: 1, 14.0: 2, 11.5: 3}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, Any]]:
    out = tmp_path_factory.mktemp("corpus")
    paths = build_sample_corpus(out)
    return paths, json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def docs(
    corpus: tuple[list[Path], dict[str, Any]],
) -> Iterator[list[tuple[pymupdf.Document, dict]]]:
    paths, manifest = corpus
    assert [p.name for p in paths] == [d["file"] for d in manifest["documents"]]
    opened = [(pymupdf.open(p), d) for p, d in zip(paths, manifest["documents"], strict=True)]
    yield opened
    for doc, _ in opened:
        doc.close()


def test_build_is_byte_for_byte_deterministic(tmp_path: Path) -> None:
    first = build_sample_corpus(tmp_path / "a", n_docs=2, seed=7)
    second = build_sample_corpus(tmp_path / "b", n_docs=2, seed=7)
    assert [p.name for p in first] == ["sample_00.pdf", "sample_01.pdf"]
    for a, b in zip(
        [*first, first[0].parent / "manifest.json"],
        [*second, second[0].parent / "manifest.json"],
        strict=True,
    ):
        assert _sha256(a) == _sha256(b), a.name
    other = build_sample_corpus(tmp_path / "c", n_docs=2, seed=8)
    assert _sha256(first[0]) != _sha256(other[0])


def test_cli_prints_paths_and_does_not_rewrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli"
    assert main(["--out", str(out), "--n-docs", "2", "--seed", "3"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(out / "sample_00.pdf"), str(out / "sample_01.pdf")]
    files = sorted(out.iterdir())
    mtimes = {p: p.stat().st_mtime_ns for p in files}
    assert main(["--out", str(out), "--n-docs", "2", "--seed", "3"]) == 0
    assert {p: p.stat().st_mtime_ns for p in files} == mtimes


def test_documents_open_and_are_long_enough(docs: list[tuple[pymupdf.Document, dict]]) -> None:
    assert len(docs) == 4
    for doc, entry in docs:
        assert doc.page_count >= 8
        assert doc.page_count == entry["page_count"]
        assert doc.metadata["title"] == entry["title"]


def test_heading_titles_appear_on_stated_pages(docs: list[tuple[pymupdf.Document, dict]]) -> None:
    for doc, entry in docs:
        levels = [h["level"] for h in entry["headings"]]
        assert levels[0] == 1 and set(levels) == {1, 2, 3}
        assert 3 <= levels.count(1) <= 4
        for heading in entry["headings"]:
            assert heading["title"] in doc[heading["page"] - 1].get_text(), heading


def test_headings_are_exactly_the_large_bold_spans(
    docs: list[tuple[pymupdf.Document, dict]],
) -> None:
    for doc, entry in docs:
        found = []
        for page in doc.pages(1):
            for block in page.get_text("dict")["blocks"]:
                for line in block.get("lines", []):
                    for span in line["spans"]:
                        if span["flags"] & pymupdf.TEXT_FONT_BOLD and span["size"] >= 11:
                            level = HEADING_SIZES[round(span["size"], 1)]
                            found.append(
                                {"level": level, "title": span["text"], "page": page.number + 1}
                            )
        assert found == entry["headings"]


def test_chapters_start_new_pages_and_running_header_footer(
    docs: list[tuple[pymupdf.Document, dict]],
) -> None:
    for doc, entry in docs:
        chapter_pages = [h["page"] for h in entry["headings"] if h["level"] == 1]
        assert len(set(chapter_pages)) == len(chapter_pages)
        for page in doc:
            w, h = page.rect.width, page.rect.height
            header = _flat(page.get_text(clip=pymupdf.Rect(0, 0, w, 50)))
            footer = _flat(page.get_text(clip=pymupdf.Rect(0, h - 50, w, h)))
            if page.number == 0:  # the title page has neither
                assert (header, footer) == ("", "")
            else:
                assert header == entry["title"]
                assert footer == (page.get_label() or str(page.number + 1))


@pytest.mark.slow  # find_tables() runs PyMuPDF's layout model first: about 1 s per page
def test_tables_are_detected_on_stated_pages(docs: list[tuple[pymupdf.Document, dict]]) -> None:
    for doc, entry in docs:
        assert len(entry["tables"]) >= 2
        for i, table in enumerate(entry["tables"], start=1):
            page = doc[table["page"] - 1]
            assert table["caption"].startswith(f"Table {i}: ")
            assert table["caption"] in page.get_text()
            rows = table["rows"]
            assert len(rows) >= 4 and {len(row) for row in rows} == {3}
            found = page.find_tables().tables
            assert len(found) == 1
            assert (found[0].row_count, found[0].col_count) == (len(rows), 3)
            assert found[0].header.names == rows[0]
            markdown = found[0].to_markdown()
            assert all(f"|{cell}|" in markdown for row in rows for cell in row)


def test_figure_image_and_caption_on_stated_page(docs: list[tuple[pymupdf.Document, dict]]) -> None:
    for doc, entry in docs:
        assert len(entry["figures"]) == 1
        figure = entry["figures"][0]
        page = doc[figure["page"] - 1]
        assert figure["caption"].startswith("Figure 1: ")
        assert figure["caption"] in page.get_text()
        assert page.get_images()
        assert sum(len(p.get_images()) for p in doc) == 1


def test_bullets_and_cross_references(docs: list[tuple[pymupdf.Document, dict]]) -> None:
    for doc, entry in docs:
        lines = [line for page in doc for line in page.get_text().splitlines()]
        assert any(line.startswith("\u2022 ") for line in lines)
        targets = {
            item["caption"].split(":")[0]: item["page"]
            for item in entry["tables"] + entry["figures"]
        }
        assert {x["target"] for x in entry["cross_references"]} == {"Table 2", "Figure 1"}
        for xref in entry["cross_references"]:
            assert xref["text"] in _flat(doc[xref["page"] - 1].get_text())
            assert xref["target_page"] == targets[xref["target"]]


def test_outline_and_page_labels_only_on_some_documents(
    docs: list[tuple[pymupdf.Document, dict]],
) -> None:
    assert [entry["has_outline"] for _, entry in docs] == [True, False, True, False]
    assert [entry["has_page_labels"] for _, entry in docs] == [False, True, False, False]
    for doc, entry in docs:
        toc = [{"level": lvl, "title": title, "page": page} for lvl, title, page in doc.get_toc()]
        assert toc == (entry["headings"] if entry["has_outline"] else [])
        labels = [doc[i].get_label() for i in range(3)]
        assert labels == (["i", "1", "2"] if entry["has_page_labels"] else ["", "", ""])
