"""Deterministic generator for a small corpus of multi-chapter sample PDFs.

Each PDF is a short "book" about a few Python standard-library modules. All body text comes
from the docstrings that ship with the running Python (PSF-licensed, read via
``inspect.getdoc``), so the corpus contains no third-party data. The output is byte-for-byte
deterministic for a given ``(n_docs, seed)`` and Python version (docstrings differ slightly
between Python releases).

Next to the PDFs, ``manifest.json`` records the ground truth an indexer should recover: the
heading tree (level, title, 1-based physical page), table and figure captions with their
pages, and the cross-references in the body text.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import random
import re
import unicodedata
from pathlib import Path
from typing import Any

import pymupdf

__all__ = ["build_sample_corpus"]

THEMES: dict[str, tuple[str, ...]] = {
    # The first module of each theme gets the chapter's table, so it needs >= 3 callables.
    "Text Processing": ("textwrap", "re", "string"),
    "Data Structures": ("collections", "heapq", "bisect"),
    "Functional Programming": ("itertools", "functools", "operator"),
    "Files and Data Formats": ("json", "csv", "pathlib"),
    "Numeric Tools": ("statistics", "math"),
}
BOOK_TITLES = (
    "Notes on the Standard Library",
    "The Batteries Included Handbook",
    "A Tour of Python Modules",
    "Working with the Standard Library",
    "The Module Companion",
)
FIXED_DATE = "D:20240101000000Z"

PAGE_W, PAGE_H = 595.0, 842.0  # A4
LEFT, RIGHT, TOP, BOTTOM = 72.0, PAGE_W - 72.0, 72.0, PAGE_H - 72.0
BODY_FONT, BOLD_FONT, ITALIC_FONT = "helv", "hebo", "heit"
BODY_SIZE, CAPTION_SIZE, CELL_SIZE, RUNNING_SIZE = 10.0, 9.0, 8.5, 8.0
HEADING_SIZE = {1: 20.0, 2: 14.0, 3: 11.5}
HEADING_SPACE = {1: (0.0, 18.0), 2: (14.0, 8.0), 3: (10.0, 6.0)}  # (before, after)
LEADING = 1.3
MIN_SUBSECTION_WORDS = 200
TABLE_COLS = (0.22, 0.38, 0.40)  # fractions of the text width
ROW_H = 16.0
FIG_W, FIG_H, FIG_PX = 240.0, 150.0, (320, 200)
# PyMuPDF writes base-14 text as WinAnsi bytes but maps U+2022 to the wrong code, so body
# text is kept in WinAnsi code points and the bullet is given as its WinAnsi byte.
BULLET = "\x95"
PALETTE = ((52, 101, 164), (204, 0, 0), (78, 154, 6), (196, 160, 0), (117, 80, 123))


def _clean(text: str) -> str:
    """Collapse whitespace, drop reST markup and reduce to ASCII for the base-14 fonts."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    text = re.sub(r":\w+:`([^`]*)`", r"\1", text).replace("``", "")
    return re.sub(r" at 0x[0-9a-fA-F]+", "", " ".join(text.split()))


def _paragraphs(obj: object) -> list[str]:
    """Split an object's docstring into cleaned paragraphs, dropping doctests and ASCII tables.

    A block whose lines are "* item" or "- item" becomes one bulleted paragraph per item.
    """
    paragraphs: list[str] = []
    for block in re.split(r"\n\s*\n", (inspect.getdoc(obj) or "").strip()):
        if block.lstrip()[:2] in ("* ", "- "):
            items = re.split(r"\n\s*(?=[*-] )", block.strip())
            paragraphs += [f"{BULLET} {_clean(item[2:])}" for item in items]
        elif (text := _clean(block)) and not text.startswith((">>>", "+-")):
            paragraphs.append(text)
    return paragraphs


def _first_sentence(obj: object) -> str:
    """First sentence of an object's docstring (without the final period)."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", (_paragraphs(obj) or [""])[0])[0].rstrip(".")


def _members(module: Any) -> list[tuple[str, Any]]:
    """Public documented callables of ``module``, sorted by name."""
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    members = [(n, getattr(module, n, None)) for n in sorted(set(names))]
    return [(n, obj) for n, obj in members if callable(obj) and inspect.getdoc(obj)]


def _signature(name: str, obj: Any) -> str:
    try:
        return _clean(f"{name}{inspect.signature(obj)}")
    except (TypeError, ValueError):
        return f"{name}(...)"


@functools.cache
def _advances(font: str) -> tuple[float, ...]:
    """Glyph advances (per 1pt font size) of the 256 WinAnsi codes in a base-14 font."""
    f = pymupdf.Font(font)
    chars = [bytes([code]).decode("cp1252", errors="ignore") for code in range(256)]
    return tuple(f.glyph_advance(ord(ch)) if ch else 0.0 for ch in chars)


def _width(text: str, font: str, size: float) -> float:
    """Width of WinAnsi ``text``; much faster than ``pymupdf.get_text_length`` (same result)."""
    advances = _advances(font)
    return size * sum(advances[ord(ch)] for ch in text)


def _wrap(text: str, font: str, size: float, width: float) -> list[str]:
    """Greedy line breaking of ``text`` into lines at most ``width`` wide."""
    lines: list[str] = []
    words: list[str] = []
    used, space = 0.0, _width(" ", font, size)
    for word in text.split():
        w = _width(word, font, size)
        if words and used + space + w > width:
            lines.append(" ".join(words))
            words, used = [], 0.0
        used += (space if words else 0.0) + w
        words.append(word)
    return [*lines, " ".join(words)] if words else lines


def _fit(text: str, font: str, size: float, width: float) -> str:
    """Truncate ``text`` with an ellipsis so that it fits into ``width``."""
    if _width(text, font, size) <= width:
        return text
    while text and _width(text + "...", font, size) > width:
        text = text[:-1]
    return text.rstrip() + "..."


def _bar_chart(values: list[int]) -> pymupdf.Pixmap:
    """A small RGB bar chart, one bar per value, drawn pixel by pixel (deterministic)."""
    w, h = FIG_PX
    buf = bytearray(b"\xff" * (w * h * 3))
    base, slot, top = h - 12, (w - 20) // len(values), max(values) or 1
    for i, value in enumerate(values):
        x0, x1 = 10 + i * slot + 3, 10 + (i + 1) * slot - 3
        colour = bytes(PALETTE[i % len(PALETTE)]) * (x1 - x0)
        for y in range(base - int((base - 10) * value / top), base):
            buf[(y * w + x0) * 3 : (y * w + x1) * 3] = colour
    buf[base * w * 3 : (base + 2) * w * 3] = b"\x00" * (2 * w * 3)  # x axis
    return pymupdf.Pixmap(pymupdf.csRGB, w, h, bytes(buf), 0)


class _Writer:
    """Top-to-bottom page layout with a y cursor; records ground truth as it places items."""

    def __init__(self, doc: pymupdf.Document) -> None:
        self.doc = doc
        self.page: pymupdf.Page | None = None
        self.shape: pymupdf.Shape | None = None
        self.y = TOP
        self.headings: list[dict[str, Any]] = []
        self.tables: list[dict[str, Any]] = []
        self.figures: list[dict[str, Any]] = []

    @property
    def pno(self) -> int:
        """Current 1-based physical page number."""
        assert self.page is not None
        return self.page.number + 1

    def new_page(self) -> None:
        self.finish()
        self.page = self.doc.new_page(width=PAGE_W, height=PAGE_H)
        self.shape = self.page.new_shape()
        self.y = TOP

    def finish(self) -> None:
        if self.shape is not None:
            self.shape.commit()
            self.shape = None

    def ensure(self, height: float) -> None:
        if self.y + height > BOTTOM:
            self.new_page()

    def text(self, x: float, text: str, font: str, size: float) -> None:
        """Write one line whose top is at the cursor and advance the cursor."""
        assert self.shape is not None
        self.shape.insert_text((x, self.y + size), text, fontname=font, fontsize=size)
        self.y += size * LEADING

    def centred(self, text: str, font: str, size: float) -> None:
        width = _width(text, font, size)
        self.text((PAGE_W - width) / 2, text, font, size)

    def heading(self, level: int, title: str) -> None:
        size = HEADING_SIZE[level]
        before, after = HEADING_SPACE[level]
        if level == 1:
            self.new_page()
        else:
            self.y += before
            self.ensure(size * LEADING + after + 3 * BODY_SIZE * LEADING)  # keep with next
        self.text(LEFT, title, BOLD_FONT, size)
        self.y += after
        self.headings.append({"level": level, "title": title, "page": self.pno})

    def paragraph(self, text: str, keep: bool = False) -> int:
        """Lay out a body paragraph (a list item if it starts with BULLET); returns its page.

        With ``keep`` the paragraph is not split across pages.
        """
        bullet = text.startswith(BULLET)
        indent = 14.0 if bullet else 0.0
        lines = _wrap(text.removeprefix(BULLET), BODY_FONT, BODY_SIZE, RIGHT - LEFT - indent)
        marker = f"{BULLET} "
        line_h = BODY_SIZE * LEADING
        self.ensure(line_h * (len(lines) if keep else 1))
        page = self.pno
        for i, line in enumerate(lines):
            self.ensure(line_h)
            if bullet and i == 0:  # the bullet hangs in the indent, on the same text line
                x = LEFT + indent - _width(marker, BODY_FONT, BODY_SIZE)
                self.text(x, marker + line, BODY_FONT, BODY_SIZE)
            else:
                self.text(LEFT + indent, line, BODY_FONT, BODY_SIZE)
        self.y += 0.5 * line_h
        return page

    def table(self, caption: str, rows: list[list[str]]) -> None:
        """A ruled table (full cell grid as vector lines) with the caption above it.

        The first row is the header (bold); cell text is truncated to fit its column.
        """
        self.ensure(CAPTION_SIZE * LEADING + 4 + ROW_H * len(rows) + 12)
        xs = [LEFT]
        for frac in TABLE_COLS:
            xs.append(xs[-1] + frac * (RIGHT - LEFT))
        fonts = [BOLD_FONT] + [BODY_FONT] * (len(rows) - 1)
        cells = [
            [_fit(cell, font, CELL_SIZE, xs[c + 1] - xs[c] - 6) for c, cell in enumerate(row)]
            for font, row in zip(fonts, rows, strict=True)
        ]
        self.tables.append({"caption": caption, "page": self.pno, "rows": cells})
        self.text(LEFT, caption, ITALIC_FONT, CAPTION_SIZE)
        self.y += 4
        top, bottom = self.y, self.y + ROW_H * len(rows)
        assert self.shape is not None
        for r, (font, row) in enumerate(zip(fonts, cells, strict=True)):
            base = top + r * ROW_H + ROW_H / 2 + CELL_SIZE * 0.35
            for x, text in zip(xs, row, strict=False):
                self.shape.insert_text((x + 3, base), text, fontname=font, fontsize=CELL_SIZE)
        for r in range(len(rows) + 1):
            self.shape.draw_line((xs[0], top + r * ROW_H), (xs[-1], top + r * ROW_H))
        for x in xs:
            self.shape.draw_line((x, top), (x, bottom))
        self.shape.finish(color=(0, 0, 0), width=0.6)
        self.y = bottom + 12

    def figure(self, caption: str, pixmap: pymupdf.Pixmap) -> None:
        """A raster image centred on the page with the caption below it."""
        self.ensure(FIG_H + 6 + CAPTION_SIZE * LEADING + 10)
        assert self.page is not None
        x0 = (PAGE_W - FIG_W) / 2
        self.page.insert_image(pymupdf.Rect(x0, self.y, x0 + FIG_W, self.y + FIG_H), pixmap=pixmap)
        self.y += FIG_H + 6
        self.centred(caption, ITALIC_FONT, CAPTION_SIZE)
        self.y += 10
        self.figures.append({"caption": caption, "page": self.pno})


def _title_page(w: _Writer, title: str) -> None:
    """The title page: no running header and no page number."""
    w.new_page()
    w.y = 240.0
    for line in _wrap(title, BOLD_FONT, 28.0, RIGHT - LEFT):
        w.centred(line, BOLD_FONT, 28.0)
    w.y += 24
    w.centred("A sample book compiled from Python standard library docstrings", BODY_FONT, 12.0)
    w.y = BOTTOM - 20
    w.centred("Docstring text (c) Python Software Foundation, PSF License.", BODY_FONT, 9.0)


def _section(w: _Writer, rng: random.Random, number: str, name: str, with_table: bool) -> None:
    """Section about one module: intro, optional table, then 2-3 subsections on its callables."""
    module = importlib.import_module(name)
    members = _members(module)
    w.heading(2, f"{number} The {name} module")
    filler = _paragraphs(module) + [p for _, obj in members for p in _paragraphs(obj)]
    n_intro = 2
    while n_intro < len(filler) and filler[n_intro].startswith(BULLET):
        n_intro += 1  # keep a bulleted list of the module docstring together
    for para in filler[:n_intro]:
        w.paragraph(para)
    if with_table:
        rows = [["Name", "Signature", "Summary"]]
        rows += [[n, _signature(n, o), _first_sentence(o)] for n, o in members[:5]]
        w.table(f"Table {len(w.tables) + 1}: Selected callables of the {name} module", rows)
    chosen = sorted(rng.sample(range(len(members)), min(len(members), rng.randint(2, 3))))
    for sub, idx in enumerate(chosen, start=1):
        m_name, obj = members[idx]
        kind = "class" if inspect.isclass(obj) else "function"
        w.heading(3, f"{number}.{sub} The {m_name} {kind}")
        paragraphs, k = _paragraphs(obj), rng.randrange(len(filler))
        while sum(len(p.split()) for p in paragraphs) < MIN_SUBSECTION_WORDS:
            paragraphs.append(filler[k % len(filler)])  # pad by cycling through the module text
            k += 1
        for para in paragraphs:
            w.paragraph(para)


def _finish_book(
    doc: pymupdf.Document, w: _Writer, index: int, title: str, themes: list
) -> tuple[bool, bool]:
    """Page labels (book 1), running header and footer, outline (even books), metadata.
    Returns whether the book has page labels and whether it has an outline."""
    labelled = index == 1  # one document uses PDF page labels: i, 1, 2, ...
    if labelled:
        doc.set_page_labels(
            [
                {"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1},
                {"startpage": 1, "prefix": "", "style": "D", "firstpagenum": 1},
            ]
        )
    for page in doc.pages(1):  # running header and footer on every page but the title page
        number = str(page.number if labelled else page.number + 1)
        for text, y in ((title, 40.0), (number, PAGE_H - 40.0)):
            width = _width(text, BODY_FONT, RUNNING_SIZE)
            page.insert_text(((PAGE_W - width) / 2, y), text, fontsize=RUNNING_SIZE)
    has_outline = index % 2 == 0
    if has_outline:
        doc.set_toc([[h["level"], h["title"], h["page"]] for h in w.headings])
    doc.set_metadata(
        {
            "title": title,
            "author": "bookindex sample corpus",
            "subject": ", ".join(themes),
            "creator": "bookindex",
            "producer": "bookindex",
            "creationDate": FIXED_DATE,
            "modDate": FIXED_DATE,
        }
    )
    return labelled, has_outline


def _book(index: int, seed: int) -> tuple[bytes, dict[str, Any]]:
    """Build one PDF in memory; returns its bytes and its manifest entry."""
    rng = random.Random(seed * 1_000_003 + index)
    title = f"{rng.choice(BOOK_TITLES)}, Volume {index + 1}"
    themes = rng.sample(sorted(THEMES), rng.randint(3, 4))
    doc = pymupdf.open()
    w = _Writer(doc)
    _title_page(w, title)
    xrefs: list[dict[str, Any]] = []
    for ch, theme in enumerate(themes, start=1):
        names = THEMES[theme]
        w.heading(1, f"{ch} {theme}")
        w.paragraph(
            f"This chapter covers the {', '.join(names[:-1])} and {names[-1]} modules. Each "
            "section introduces one module and then describes a selection of its functions and "
            "classes in turn."
        )
        if ch == len(themes):  # by now there are >= 2 tables and the figure to refer back to
            page = w.paragraph(
                f"The callables of the {THEMES[themes[1]][0]} module are summarised earlier "
                "(see Table 2), and the modules differ widely in how much documentation they "
                "carry, as shown in Figure 1.",
                keep=True,
            )
            for text, item in (
                ("see Table 2", w.tables[1]),
                ("as shown in Figure 1", w.figures[0]),
            ):
                target = item["caption"].split(":")[0]
                xrefs.append(
                    {"text": text, "target": target, "page": page, "target_page": item["page"]}
                )
        for name in names:
            module = importlib.import_module(name)  # pathlib has no module docstring in 3.11
            summary = _first_sentence(module if inspect.getdoc(module) else _members(module)[0][1])
            w.paragraph(f"{BULLET} {name}: {summary}.")
        if ch == 1:
            sizes = [
                len(inspect.getdoc(importlib.import_module(m)) or "")
                for t in themes
                for m in THEMES[t]
            ]
            w.figure(
                "Figure 1: Relative length of each module docstring, in book order",
                _bar_chart(sizes),
            )
        for sec, name in enumerate(names, start=1):
            _section(w, rng, f"{ch}.{sec}", name, with_table=sec == 1)
    w.finish()
    labelled, has_outline = _finish_book(doc, w, index, title, themes)
    entry = {
        "title": title,
        "page_count": doc.page_count,
        "has_outline": has_outline,
        "has_page_labels": labelled,
        "headings": w.headings,
        "tables": w.tables,
        "figures": w.figures,
        "cross_references": xrefs,
    }
    data = doc.tobytes(garbage=3, deflate=True, no_new_id=True)
    doc.close()
    return data, entry


def _write_if_changed(path: Path, data: bytes) -> None:
    """Write ``data`` unless ``path`` already holds exactly these bytes (keeps its mtime)."""
    if not (path.is_file() and path.read_bytes() == data):
        path.write_bytes(data)


def build_sample_corpus(out_dir: str | Path, n_docs: int = 4, seed: int = 0) -> list[Path]:
    """Write ``n_docs`` sample PDFs plus ``manifest.json`` into ``out_dir``.

    The output is byte-for-byte deterministic for the same arguments (and Python version), and
    files whose bytes would not change are left untouched. Documents with an even index carry a
    PDF outline, odd ones do not; document 1 also has PDF page labels (title page "i", then
    1, 2, ...). Pages in the manifest are always 1-based physical page numbers.

    Returns:
        The sorted paths of the PDFs written.
    """
    if n_docs < 1:
        raise ValueError("n_docs must be >= 1")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    documents: list[dict[str, Any]] = []
    for i in range(n_docs):
        data, entry = _book(i, seed)
        path = out / f"sample_{i:02d}.pdf"
        _write_if_changed(path, data)
        paths.append(path)
        documents.append({"file": path.name, **entry})
    manifest = {
        "generator": "bookindex.operators.eval.sample_corpus",
        "seed": seed,
        "documents": documents,
    }
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    _write_if_changed(out / "manifest.json", text.encode())
    return sorted(paths)
