"""Ruled tables on a page: the vector rulings (strokes and thin rectangles), the grid they form
(``operators.parsing.tables``), and the words in each cell. ``operators.parsing.parse`` turns
what ``find_ruled_tables`` finds into table blocks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pymupdf

from bookindex.operators.parsing.tables import bounds, ruled_tables, table_grid

_MIN_RULE = 8.0  # points; shorter strokes are glyph or artwork fragments, not table rules
_MAX_OTHER = 200  # curves and slanted strokes beyond which a page is artwork, not a table


@dataclass
class Rulings:
    """Straight strokes of a page's vector graphics: where the horizontal rules lie (y) and
    the vertical ones (x), and how much else there is."""

    ys: set = field(default_factory=set)
    xs: set = field(default_factory=set)
    other: int = 0  # curves and the tiny segments of vector artwork
    area: list[float] = field(default_factory=lambda: [1e9, 1e9, -1e9, -1e9])  # rules' union

    def add(self, x0: float, y0: float, x1: float, y1: float) -> None:
        if y1 - y0 < 2 and x1 - x0 >= _MIN_RULE:
            self.ys.add(round(y0 / 2))
        elif x1 - x0 < 2 and y1 - y0 >= _MIN_RULE:
            self.xs.add(round(x0 / 2))
        else:
            return
        a = self.area
        if x0 < a[0]:
            a[0] = x0
        if y0 < a[1]:
            a[1] = y0
        if x1 > a[2]:
            a[2] = x1
        if y1 > a[3]:
            a[3] = y1

    @property
    def is_grid(self) -> bool:
        """At least three distinct rows and columns of rules: a frame alone is not a table."""
        return len(self.ys) >= 3 and len(self.xs) >= 3 and self.other <= _MAX_OTHER


def page_rulings(page: pymupdf.Page, paths: list[dict] | None = None) -> Rulings:
    """Rules are straight strokes and thin rectangles at least ``_MIN_RULE`` long, and the
    sides of stroked boxes; filled boxes are backgrounds and frames. ``paths``: the page's
    ``get_cdrawings()`` when the caller has them already."""
    found = Rulings()
    for path in page.get_cdrawings() if paths is None else paths:
        if found.other > _MAX_OTHER:  # artwork, not a table page: the rest cannot change that
            break
        stroked = "s" in path.get("type", "s")
        for item in path["items"]:
            if item[0] == "l":
                (ax, ay), (bx, by) = item[1], item[2]
                straight = abs(ay - by) < 1 or abs(ax - bx) < 1
                found.add(min(ax, bx), min(ay, by), max(ax, bx), max(ay, by))
                found.other += not straight
            elif item[0] == "re":
                x0, y0, x1, y1 = item[1]
                if abs(y1 - y0) < 2 or abs(x1 - x0) < 2:  # a rule drawn as a thin rectangle
                    found.add(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
                elif stroked:
                    for side in (
                        (x0, y0, x1, y0),
                        (x0, y1, x1, y1),
                        (x0, y0, x0, y1),
                        (x1, y0, x1, y1),
                    ):
                        found.add(*side)
            else:
                found.other += 1
    return found


def cell_texts(grid: list[tuple], bbox: tuple, words: list[tuple]) -> list[list[str]]:
    """Cell text by word centres. ``grid``: (row bbox, cells) per row, a cell ``None`` where
    a merged cell covers the slot. (find_tables' Table.extract() matched every character to
    every cell in Python and dropped the spaces of wrapped cells.)"""
    rows: list[list[list[str]]] = [[[] for _ in cells] for _, cells in grid]
    x0, y0, x1, y1 = bbox
    for wx0, wy0, wx1, wy1, text, *_ in words:
        cx, cy = (wx0 + wx1) / 2, (wy0 + wy1) / 2
        if not (x0 <= cx <= x1 and y0 <= cy <= y1):
            continue
        for r, (row_bbox, cells) in enumerate(grid):
            if not row_bbox[1] <= cy <= row_bbox[3]:
                continue
            for c, cell in enumerate(cells):
                if cell and cell[0] <= cx <= cell[2] and cell[1] <= cy <= cell[3]:
                    rows[r][c].append(text)
                    break
            break
    return [[" ".join(cell) for cell in row] for row in rows]


def sorted_words(page: pymupdf.Page, tolerance: float = 3) -> list[tuple]:
    """``page.get_text("words", sort=True)`` with the same order: words sorted by bottom,
    then grouped into lines (a word whose top or bottom lies within ``tolerance`` of the line's
    box joins it) and each line sorted left to right. PyMuPDF's sort builds two Rect objects
    per word, most of the call's time."""
    words = page.get_text("words")
    if not words:
        return words
    words.sort(key=lambda w: (w[3], w[0]))
    out: list[tuple] = []
    line = [words[0]]
    lx0, ly0, lx1, ly1 = words[0][:4]
    for w in words[1:]:
        x0, y0, x1, y1 = w[:4]
        if abs(y0 - ly0) <= tolerance or abs(y1 - ly1) <= tolerance:
            line.append(w)
            if x0 >= x1 or y0 >= y1:  # an empty box leaves the line box as it is
                continue
            if lx0 >= lx1 or ly0 >= ly1:
                lx0, ly0, lx1, ly1 = x0, y0, x1, y1
            else:
                lx0, ly0, lx1, ly1 = min(lx0, x0), min(ly0, y0), max(lx1, x1), max(ly1, y1)
        else:
            line.sort(key=lambda w: w[0])
            out += line
            line = [w]
            lx0, ly0, lx1, ly1 = x0, y0, x1, y1
    line.sort(key=lambda w: w[0])
    out += line
    return out


def find_ruled_tables(page: pymupdf.Page) -> list[tuple[tuple, list[list[str]], int, int]]:
    """(bbox, cell texts by row, rows, columns) of each accepted ruled table on the page:
    at least 2 rows and 2 columns, at least half the cells filled.

    Detection is ``operators.parsing.tables`` on the page's vector drawings, the algorithm of
    find_tables' line strategy without its per-character Python dicts (PyMuPDF 2.x also gates
    find_tables with an ONNX layout model by default, about 1 s per page). Only pages whose
    rulings form a grid are searched, and only the ruled area of those.
    """
    paths = page.get_cdrawings()
    rulings = page_rulings(page, paths)
    if not rulings.is_grid:
        return []
    words = sorted_words(page)
    clip = tuple((pymupdf.Rect(rulings.area) + (-4, -4, 4, 4)) & page.rect)
    found = []
    for cells in ruled_tables(paths, words, clip):
        grid = table_grid(cells)
        bbox = bounds(cells)
        rows = cell_texts(grid, bbox, words)
        n_rows, n_cols = len(grid), len(grid[0][1])
        texts = [c for r in rows for c in r]
        if n_rows < 2 or n_cols < 2 or sum(bool(c) for c in texts) < 0.5 * len(texts):
            continue
        found.append((bbox, rows, n_rows, n_cols))
    return found
