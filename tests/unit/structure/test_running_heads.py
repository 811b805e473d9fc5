"""Running heads set below the page margin (a deep top margin) are furniture when they recur as
the pages' topmost line at one height (operators/structure/furniture._mark_deep_running_heads);
a chapter label or a heading that opens a page now and then is not."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from operators.kinds import HEADER, TEXT
from operators.parsing.parse import parse_pages
from operators.structure.furniture import mark_headers_footers


def _marked(shared_data: Path, corpus: str, prefix: str, first: int = 1, last: int = 0):
    found = sorted((shared_data / corpus / "PDFs").glob(f"{prefix}*.pdf"))
    if not found:
        pytest.skip(f"{corpus} book {prefix} missing from the shared data")
    with pymupdf.open(str(found[0])) as doc:
        last = last or doc.page_count
        blocks = parse_pages(doc, first - 1, last).blocks
    mark_headers_footers(blocks, last - first + 1)
    return blocks


def test_running_heads_below_the_margin_are_furniture(shared_data):
    # from p. 21 on: "A. Consumer Data Protection in Brazil  14" (even folios) and "Chapter 2:
    # Country Studies  15" (odd) sit at 58 pt of 680, below the 8.5 % margin; they were kept as
    # headings ("A. Consumer Data Protection in Brazil 14", 81 of them across the book).
    blocks = _marked(shared_data, "hips_extra", "consumer-data-protection", 13, 40)
    heads = [b for b in blocks if b.text.startswith(("A. Consumer Data Protection in Brazil",
                                                      "Chapter 2: Country Studies"))]  # fmt: skip
    running = [b for b in heads if b.y0 < 100]
    assert len(running) == 21 and all(b.kind == HEADER for b in running)
    # the chapter's and the section's own headings on p. 20 (larger, lower) stay in the flow
    opening = [b for b in blocks if b.page == 19 and b.font_size >= 14]
    assert len(opening) >= 2 and all(b.kind == TEXT for b in opening)


def test_chapter_labels_that_open_pages_stay_in_the_flow(shared_data):
    # "CHAPTER 1", "CHAPTER 2", … open their chapters' first pages, many pages apart
    blocks = _marked(shared_data, "hips_extra", "bank-regulation")
    labels = [b for b in blocks if b.text.strip().upper().startswith("CHAPTER ")]
    assert len(labels) >= 4
    assert all(b.kind != HEADER for b in labels)
