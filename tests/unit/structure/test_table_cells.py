"""One-line blocks side by side: the cells of a table drawn without rules are never headings
(``blocks._table_cells``), but a line of two-column prose level with the other column's
heading is not a table row."""

from __future__ import annotations

import pymupdf

from bookindex.operators.kinds import TEXT
from bookindex.operators.parsing.parse import Block, document_metadata, parse_pages
from bookindex.operators.structure.assemble import structure_blocks
from bookindex.operators.structure.blocks import _table_cells, body_columns, body_style


def _line(page: int, text: str, x0: float, x1: float, y0: float, n_lines: int = 1) -> Block:
    height = 11.0 * n_lines
    return Block(
        page, 0, TEXT, text, x0, y0, x1, y0 + height, 9.0, False, False, "Serif", n_lines,
        612.0, 792.0,
    )  # fmt: skip


def _two_column_page() -> list[Block]:
    """A page of two body columns (54-294 and 318-558): multi-line paragraphs in both, the
    left column's lines kept one block each, and the right column's heading "2 RELATED WORK"
    and the first line of its paragraph level with two of the left column's lines."""
    return [
        _line(1, "A paragraph of the left column, long enough to fill it. " * 3, 54, 294, 90, 4),
        _line(1, "A paragraph of the right column, long enough to fill it. " * 3, 318, 558, 90, 4),
        _line(1, "aging an Application Programming Interface (API) to automati-", 54, 294, 207),
        _line(1, "2 RELATED WORK", 318, 400, 207),
        _line(1, "cally analyze the user's personality. There already exist", 54, 294, 218),
        _line(1, "The current study investigates how to extract personality", 318, 558, 218),
    ]


def test_a_table_drawn_without_rules_has_its_cells_found():
    """Two rows of two one-line cells on a one-column page are a table's cells (with and
    without the body columns: the column test only applies where the page has two)."""
    blocks = [
        _line(1, "A paragraph of the page's one column, filling it. " * 3, 54, 558, 90, 4),
        _line(1, "Berlin Mandate", 54, 200, 160),
        _line(1, "28 Mar-7 Apr 1995", 300, 420, 160),
        _line(1, "Kyoto Protocol", 54, 200, 180),
        _line(1, "1-11 Dec 1997", 300, 400, 180),
    ]  # fmt: skip
    cells = [id(b) for b in blocks[1:]]
    assert _table_cells(blocks, {}) == set(cells)
    assert _table_cells(blocks, body_columns(blocks, body_style(blocks))) == set(cells)


def test_a_line_of_two_column_prose_beside_the_other_columns_heading_is_no_table_row():
    blocks = _two_column_page()
    assert _table_cells(blocks, body_columns(blocks, body_style(blocks))) == set()
    # without the columns the two pairs read as the rows of a table
    assert id(blocks[3]) in _table_cells(blocks, {})


def test_a_two_column_paper_keeps_the_heading_level_with_a_left_column_line(shared_data):
    """2303.05039 (MMLongBench), page 2: "2 RELATED WORK" opens the right column on the line of
    the left column's "aging an Application Programming Interface (API) to automati-"; it was
    marked a table cell and dropped, outline off and on (the outline lists "2 Related Work")."""
    pdf = shared_data / "mmlongbench" / "documents" / "2303.05039v2.pdf"
    for use_outline in (False, True):
        with pymupdf.open(pdf) as doc:  # parsed again: structure_blocks types blocks in place
            meta = document_metadata(doc)
            blocks = parse_pages(doc, 0, 4).blocks
        _, headings = structure_blocks(blocks, meta["n_pages"], meta["outline"], use_outline)
        on_page_2 = [(h.level, h.title.upper()) for h in headings if h.page == 2]
        assert (1, "2 RELATED WORK") in on_page_2, (use_outline, on_page_2)
        assert (2, "2.1 THE OCEAN MODEL") in on_page_2
