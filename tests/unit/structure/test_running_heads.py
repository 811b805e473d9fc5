"""Running heads set below the page margin (a deep top margin) are furniture when they recur as
the pages' topmost line at one height (operators/structure/furniture._mark_deep_running_heads);
a chapter label or a heading that opens a page now and then is not."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from bookindex.operators.kinds import HEADER, TEXT
from bookindex.operators.parsing.parse import parse_pages
from bookindex.operators.structure.furniture import mark_headers_footers
from tests.conftest import missing_shared_data


def _marked(
    shared_data: Path, corpus: str, prefix: str, first: int = 1, last: int = 0, folder="PDFs"
):
    found = sorted((shared_data / corpus / folder).glob(f"{prefix}*.pdf"))
    if not found:
        missing_shared_data(f"{corpus} document {prefix} missing from the shared data")
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


def test_section_titles_in_the_running_head_band_are_furniture(shared_data):
    # aegis sets the chapter's title on even pages (repeating: found by its wording) and the
    # section's title on odd pages at the same height and in the same 9 pt type; a section of
    # two or three pages repeats its title too seldom to be found by wording, so the band is.
    blocks = _marked(shared_data, "hips", "aegis-or-achilles-heel")
    odd = [b for b in blocks if b.page in (17, 27, 29) and b.y0 < 50]
    assert [b.text.split()[1] for b in odd] == ["The", "Comments", "Comments"]
    assert all(b.kind == HEADER for b in odd)
    # the sections' own headings, lower on their pages in the text's 10.5 pt, stay in the flow
    own = [b for b in blocks if b.text.startswith(("A. The Glucoamylase", "E. Comments"))]
    own = [b for b in own if b.page in (16, 26)]
    assert len(own) == 2 and all(b.kind == TEXT for b in own)


def test_headings_that_open_a_page_at_the_text_top_stay_in_the_flow(shared_data):
    # Adobe's 10-K sets its running heads at the top of the text area in the headings' type;
    # "ITEM 3. LEGAL PROCEEDINGS" and "PART II" open pages 32 and 33 there: headings, not
    # furniture (they start the text area; a running head sits above it).
    blocks = _marked(shared_data, "mmlongbench", "ADOBE_2015_10K", folder="documents")
    opening = [b for b in blocks if b.page in (32, 33) and b.y0 < 45]
    assert [b.text.split()[0] for b in opening] == ["ITEM", "PART"]
    assert all(b.kind == TEXT for b in opening)


def test_a_heading_under_a_running_head_is_not_one(shared_data):
    # Costco's 10-K: "Table of Contents" heads every page; "Human Capital" and "Competition",
    # the first lines under it on pages 6 and 7, are headings set at the band's height
    # elsewhere in the book, but a page's running head is above them.
    blocks = _marked(shared_data, "mmlongbench", "COSTCO_2021_10K", folder="documents")
    heads = [
        b for b in blocks if b.page in (6, 7) and b.text.strip() in ("Human Capital", "Competition")
    ]
    assert len(heads) == 2 and all(b.kind == TEXT for b in heads)
