"""How well OCR reads a page: character error rate against the page's own text layer.

A page of a text PDF is rendered to an image, read back by OCR, and the lines OCR read are
compared with the words of the text layer they cover. The comparison is line-aligned, so that
reading order (columns, marginal notes) does not count as an error:

* each text-layer word goes to the OCR line whose box holds its centre (boxes widened by a
  fifth of their height); the OCR line's text is compared with those words, in line order,
  joined by single spaces (Levenshtein distance, spaces included);
* words no OCR line covers are deletions (all their characters), OCR lines that cover no word
  are insertions (all theirs);
* CER = (edits + deletions + insertions) / characters of the text layer.

Both sides are NFKC-normalised, typographic quotes and dashes made ASCII, ligatures expanded,
and leader dots (". . . . ." of a table of contents) dropped; nothing else is forgiven (case,
punctuation and spacing count).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pymupdf

_TYPOGRAPHY = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "-",
        "\u2212": "-",
        "\u00ad": "",
    }
)


_LEADER_DOTS = re.compile(r"(?:\.\s*){3,}")


def normalize_text(text: str) -> str:
    """NFKC, ASCII quotes and dashes, leader dots (three or more, spaced or not) dropped,
    single spaces."""
    text = unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHY)
    return " ".join(_LEADER_DOTS.sub(" ", text).split())


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insert, delete, substitute: 1 each), a row of numpy at a time."""
    if not a or not b:
        return len(a) + len(b)
    codes_b = np.frombuffer(b.encode("utf-32-le"), np.uint32)
    ramp = np.arange(len(b) + 1, dtype=np.int64)
    row = ramp.copy()
    codes_a = np.frombuffer(a.encode("utf-32-le"), np.uint32)
    for i, code in enumerate(codes_a, start=1):
        substitute = row[:-1] + (codes_b != code)
        delete = row[1:] + 1
        best = np.empty_like(row)
        best[0] = i
        best[1:] = np.minimum(substitute, delete)
        # insertions: best[j] = min over k <= j of best[k] + (j - k)
        row = np.minimum.accumulate(best - ramp) + ramp
    return int(row[-1])


@dataclass
class PageCer:
    """One page's comparison: errors over reference characters."""

    errors: int
    ref_chars: int
    ocr_lines: int
    ref_words: int

    @property
    def cer(self) -> float:
        return self.errors / self.ref_chars if self.ref_chars else 0.0


def text_layer_words(page: pymupdf.Page) -> list[tuple[float, float, float, float, str]]:
    """The page's words with their boxes (ligatures expanded; a word of dots alone, a leader
    dot, left out)."""
    flags = pymupdf.TEXTFLAGS_WORDS & ~pymupdf.TEXT_PRESERVE_LIGATURES
    words = [(*w[:4], normalize_text(w[4])) for w in page.get_text("words", flags=flags, sort=True)]
    return [w for w in words if w[4].strip(". ")]


def page_cer(
    words: Sequence[tuple[float, float, float, float, str]],
    lines: Sequence[tuple[float, float, float, float, str]],
) -> PageCer:
    """Line-aligned character errors of OCR ``lines`` (x0, y0, x1, y1, text) against the
    text-layer ``words`` (same form) of one page; see the module docstring."""
    assigned: list[list[tuple[float, float, str]]] = [[] for _ in lines]
    uncovered = 0
    for x0, y0, x1, y1, text in words:
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        for k, (lx0, ly0, lx1, ly1, _) in enumerate(lines):
            pad = 0.2 * (ly1 - ly0)
            if lx0 - pad <= cx <= lx1 + pad and ly0 - pad <= cy <= ly1 + pad:
                assigned[k].append((y0, x0, text))
                break
        else:
            uncovered += len(text) + 1  # the word and the space before it
    errors = uncovered
    for (*_, text), covered in zip(lines, assigned, strict=True):
        hyp = normalize_text(text)
        ref = " ".join(t for *_, t in _in_line_order(covered))
        errors += edit_distance(hyp, ref) if covered else len(hyp)
    ref_chars = sum(len(w[4]) + 1 for w in words)
    return PageCer(errors, ref_chars, len(lines), len(words))


def _in_line_order(words: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """Words of one OCR line, left to right."""
    return sorted(words, key=lambda w: w[1])


def corpus_cer(pages: Sequence[PageCer]) -> float:
    """Errors over reference characters, summed over pages (micro average)."""
    ref = sum(p.ref_chars for p in pages)
    return sum(p.errors for p in pages) / ref if ref else 0.0


def page_subset_pdf(src: str, dst: str, pages: Sequence[int]) -> None:
    """A text PDF of ``pages`` (1-based) of ``src``, without its outline: the reference a
    scan of the same pages is compared with."""
    with pymupdf.open(src) as doc, pymupdf.open() as out:
        for page in pages:
            out.insert_pdf(doc, from_page=page - 1, to_page=page - 1, links=False, annots=False)
        out.set_toc([])
        out.save(dst, garbage=3, deflate=True)


def image_only_pdf(src: str, dst: str, dpi: int = 200, pages: Sequence[int] | None = None) -> int:
    """A scan of ``src``: each page (1-based ``pages``; None: all) rendered at ``dpi`` in grey
    and placed as the whole of a page of the same size, with no text layer and no outline.
    Returns the number of pages written."""
    with pymupdf.open(src) as doc, pymupdf.open() as out:
        numbers = list(pages) if pages is not None else range(1, doc.page_count + 1)
        for number in numbers:
            page = doc[number - 1]
            pixmap = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
            target = out.new_page(width=page.rect.width, height=page.rect.height)
            target.insert_image(target.rect, pixmap=pixmap)
        out.save(dst, garbage=3, deflate=True)
        return len(numbers)
