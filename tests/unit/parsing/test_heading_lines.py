"""A heading's own line at the head of the paragraph it opens, in the paragraph's face, is cut
off as a block of its own (``parse._split_numbered_first_lines``), so the section filters can
see it; a justified paragraph's first line, a footnote's or a contents line is not."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from bookindex.operators.parsing.parse import heading_line, parse_pages
from tests.conftest import missing_shared_data


def _page_blocks(shared_data: Path, corpus: str, prefix: str, page: int):
    found = sorted((shared_data / corpus / "PDFs").glob(f"{prefix}*.pdf"))
    if not found:
        missing_shared_data(f"{corpus} book {prefix} missing from the shared data")
    with pymupdf.open(str(found[0])) as doc:
        return parse_pages(doc, page - 1, page).blocks


def test_numbered_heading_line_cut_off_its_paragraph(shared_data):
    # p. 56: "1.2.1.1 Banks' role in the extension of credit" in body face, the paragraph
    # "Banks serve as engines of the economy …" going on from the next line (gold level 5).
    blocks = _page_blocks(shared_data, "hips_extra", "bank-regulation", 56)
    texts = [b.text for b in blocks]
    assert "1.2.1.1 Banks’ role in the extension of credit" in texts
    k = texts.index("1.2.1.1 Banks’ role in the extension of credit")
    assert blocks[k].n_lines == 1
    assert blocks[k + 1].text.startswith("Banks serve as engines of the economy")
    assert blocks[k + 1].y0 >= blocks[k].y1 - 0.5
    # the justified paragraphs on the page keep their first lines
    assert any(t.startswith("Banks’ central role in the economy is perhaps") for t in texts)
    assert not any(
        t == "Banks’ central role in the economy is perhaps the most critical" for t in texts
    )


def test_capitals_and_roman_heading_lines(shared_data):
    # basic-income-tax: the case notes' "DISCUSSION" (p. 108) and "I. Background" (p. 72)
    # open their paragraphs in the body face.
    texts = [b.text for b in _page_blocks(shared_data, "hips_extra", "basic-income-tax", 108)]
    assert "DISCUSSION" in texts
    texts = [
        b.text.strip() for b in _page_blocks(shared_data, "hips_extra", "basic-income-tax", 72)
    ]
    assert any(t.startswith("I.") and t.endswith("Background") for t in texts)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("1.2.1.1 Banks’ role in the extension of credit", True),
        ("a. The controller", True),
        ("III.  Conclusion", True),
        ("1.  A Direct Tax?", True),
        ("DISCUSSION", True),
        ("2. Lauren, “First Principles.”", False),  # a note: ends on a stop inside quotes
        ("4.1.1  Discretion as a double-edged sword 167", False),  # a contents line
        ("CAMELS 73–74", False),  # an index entry
        ("1.2 million people were displaced by the floods in", False),  # no capital after it
        ("The court held that the tax was", False),  # an ordinary first line
        ("Over the seven years from 1994 to 2000 the Foundation conducted the following:", False),
    ],
)
def test_heading_line(line, expected):
    assert heading_line(line) is expected
