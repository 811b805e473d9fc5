"""Ruled tables from vector rulings (operators.parsing.tables through operators.parsing.ruled_tables and parse._table_blocks), on real
pages of the shared PDFs and on a drawn grid with a merged cell."""

from __future__ import annotations

import pymupdf
import pytest

from bookindex.operators.kinds import TABLE
from bookindex.operators.parsing.parse import _table_blocks
from bookindex.operators.parsing.ruled_tables import find_ruled_tables, page_rulings, sorted_words
from bookindex.operators.parsing.tables import table_grid
from tests.conftest import missing_shared_data

PAPER = "mmlongbench/documents/2303.05039v2.pdf"
MANUAL = "mmlongbench/documents/User_Manual_1500S_Classic_EN.pdf"
REPORT = "docugami/us-fed-agency-reports/data/v1/docs/2016-annual-performance-report.pdf"
HIPS_BOOK = "hips/PDFs/aegis-or-achilles-heel-the-dilemma-of-homology-in-biopatents-in-the-wake-of-novozymes.pdf"


@pytest.fixture(scope="module")
def open_page(shared_data):
    docs: dict[str, pymupdf.Document] = {}

    def page(rel: str, number: int) -> pymupdf.Page:
        path = shared_data / rel
        if not path.is_file():
            missing_shared_data(f"{rel} not in the shared data")
        if rel not in docs:
            docs[rel] = pymupdf.open(path)
        return docs[rel][number - 1]

    yield page
    for doc in docs.values():
        doc.close()


def test_paper_page_with_three_tables(open_page):
    blocks = _table_blocks(open_page(PAPER, 4), 4)
    assert [b.kind for b in blocks] == [TABLE] * 3
    assert [(b.table_rows, b.table_cols) for b in blocks] == [(7, 2), (7, 4), (2, 6)]
    assert blocks[0].extra["header"][0] == "reviewerID"
    assert blocks[1].extra["header"][:3] == ["Dataset", "Amazon-beauty", "Amazon-music"]
    assert blocks[2].extra["header"][:4] == ["User ID", "AGR", "CON", "NEU"]
    # Block text: cells joined by " | ", rows by newlines.
    assert blocks[1].text.split("\n")[0].startswith("Dataset | Amazon-beauty | Amazon-music")
    assert blocks[1].n_lines == 7


def test_table_without_outer_side_rules(open_page):
    """Booktabs-style results table, no vertical rules at the outer sides: the frame of the
    ruled area closes it, so the row-label column and the last group are kept (find_tables
    lost both here: 7x17, without "Algorithms" and "Personality2018")."""
    (bbox, rows, n_rows, n_cols), second = find_ruled_tables(open_page(PAPER, 8))
    assert (n_rows, n_cols) == (7, 19)
    assert rows[0][0] == "Algorithms" and "Personality2018" in rows[0]
    assert rows[1][:3] == ["Rating", "H@3", "H@5"]
    assert rows[2][0] == "NCF+Random" and rows[2][-1] == "0.504"
    assert second[2:4] == (6, 8) and second[1][0][0] == "Trait"


def test_icon_curves_do_not_shift_the_first_column(open_page):
    """A round icon drawn as hundreds of tiny segments next to the table must not snap the
    table's left rule onto itself (the first column would lose its numbers)."""
    (((x0, _, _, _), rows, n_rows, n_cols),) = find_ruled_tables(open_page(MANUAL, 88))
    assert (n_rows, n_cols) == (6, 3)
    assert rows[0] == ["Error number", "Error description", "Action instructions"]
    assert [r[0] for r in rows[1:]] == ["6", "88", "89", "161", "162"]
    assert x0 == pytest.approx(31.3, abs=0.2)


def test_table_of_shaded_rows(open_page):
    """Rows drawn as filled bands, a white row between them: every cell of it is found."""
    tables = find_ruled_tables(open_page(REPORT, 41))
    assert [t[2:] for t in tables] == [(3, 3), (5, 10)]
    rows = tables[0][1]
    assert rows[0] == ["Table", "FY 2016 Milestones", "Met/ Not Met"]
    assert rows[1] == ["3.01A", "Release the first annual OPM research agenda", "Met"]
    assert tables[1][1][0][1] == "Performance Measure"


@pytest.mark.parametrize(("rel", "number"), [(HIPS_BOOK, 2), (MANUAL, 7)])
def test_rulings_without_a_table(open_page, rel, number):
    """A page of logos in frames, a list between rules: rulings form a grid, no table."""
    page = open_page(rel, number)
    assert page_rulings(page).is_grid
    assert _table_blocks(page, number) == []


def test_sorted_words_match_pymupdf(open_page):
    for rel, number in ((PAPER, 4), (MANUAL, 88), (REPORT, 41)):
        page = open_page(rel, number)
        assert sorted_words(page) == page.get_text("words", sort=True)


def _grid_page(doc: pymupdf.Document, merged: bool) -> pymupdf.Page:
    """A 3x3 ruled grid; with ``merged`` the rule between the first two cells of the middle
    row is missing."""
    page = doc.new_page(width=400, height=300)
    xs, ys = [50, 150, 250, 350], [50, 80, 110, 140]
    for y in ys:
        page.draw_line((50, y), (350, y))
    for x in xs:
        for i in range(3):
            if not (merged and x == 150 and i == 1):
                page.draw_line((x, ys[i]), (x, ys[i + 1]))
    texts = [["Name", "Kind", "Size"], ["a wide merged cell", None, "1"], ["b", "y", "2"]]
    for r, row in enumerate(texts):
        for c, text in enumerate(row):
            if text:
                page.insert_text((xs[c] + 4, ys[r] + 20), text, fontsize=10)
    return page


def test_drawn_grid_with_a_merged_cell():
    with pymupdf.open() as doc:
        page = _grid_page(doc, merged=True)
        (block,) = _table_blocks(page, 1)
        assert (block.x0, block.y0, block.x1, block.y1) == (50, 50, 350, 140)
        assert (block.table_rows, block.table_cols) == (3, 3)
        assert block.extra["header"] == ["Name", "Kind", "Size"]
        assert block.text.split("\n")[1] == "a wide merged cell |  | 1"


def test_table_grid_marks_slots_under_a_merged_cell():
    cells = [(0, 0, 10, 5), (10, 0, 20, 5), (0, 5, 20, 10)]
    grid = table_grid(cells)
    assert [row for _, row in grid] == [[(0, 0, 10, 5), (10, 0, 20, 5)], [(0, 5, 20, 10), None]]
    assert [bbox for bbox, _ in grid] == [(0, 0, 20, 5), (0, 5, 20, 10)]


def test_sparse_grid_is_not_a_table():
    """Fewer than half the cells filled: rejected, like find_tables' acceptance did."""
    with pymupdf.open() as doc:
        page = doc.new_page(width=400, height=300)
        for y in (50, 80, 110, 140):
            page.draw_line((50, y), (350, y))
        for x in (50, 150, 250, 350):
            page.draw_line((x, 50), (x, 140))
        page.insert_text((54, 70), "lonely", fontsize=10)
        assert _table_blocks(page, 1) == []
