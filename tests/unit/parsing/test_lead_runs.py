"""A line's opening run of bold or italic spans is recorded on its block (``extra["lead"]``,
``parse.lead_runs``): a heading set as a bold or italic lead-in before roman text ("Commissioner
v. Glenshaw Glass Co." before ", 348 U.S. 426 (1955)") shows no style in the block's ``bold``
and ``italic``, which mean "every span"."""

from __future__ import annotations

from bookindex.operators.parsing.parse import lead_runs
from tests.unit.parsing.test_heading_lines import _page_blocks


def _block(blocks, start: str):
    found = [b for b in blocks if b.text.startswith(start)]
    assert found, f"no block starts with {start!r}"
    return found[0]


def test_bold_case_name_before_a_roman_citation(shared_data):
    # basic-income-tax p. 68: the case name in Times-Bold, its citation in Times-Roman (a gold
    # heading the learned filter missed while the block read as body face).
    blocks = _page_blocks(shared_data, "hips_extra", "basic-income-tax", 68)
    case = _block(blocks, "Commissioner v. Glenshaw Glass Co.")
    assert not case.bold and not case.italic
    bold, italic = case.extra["lead"]
    assert 0.5 < bold < 0.8 and italic == 0.0
    # the body paragraphs on the page open in roman
    body = [b for b in blocks if b.n_lines >= 5]
    assert body and all(b.extra["lead"] == (0.0, 0.0) for b in body)


def test_italic_lead_and_wholly_bold_lines(shared_data):
    # p. 66: "Notes and questions" in italic before a roman colon; p. 36: a wholly bold heading.
    notes = _block(_page_blocks(shared_data, "hips_extra", "basic-income-tax", 66), "Notes and")
    assert notes.extra["lead"][0] == 0.0 and notes.extra["lead"][1] > 0.9
    heading = _block(_page_blocks(shared_data, "hips_extra", "basic-income-tax", 36), "VIII.")
    assert heading.bold and heading.extra["lead"][0] == 1.0


def _span(text: str, font: str, flags: int = 0) -> dict:
    return {"text": text, "font": font, "flags": flags, "size": 10.0}


def test_lead_runs_counts_the_opening_run_only():
    line = {
        "spans": [
            _span(" ", "Times-Roman"),
            _span("Title", "Times-Bold"),
            _span(" and more", "Times-Roman"),
            _span("bold again", "Times-Bold"),
        ]
    }
    assert lead_runs(line) == (round(5 / 23, 3), 0.0)  # stripped: 5 + 8 + 10
    italic_by_flag = {"spans": [_span("Notes", "Times", 2), _span(":", "Times")]}
    assert lead_runs(italic_by_flag) == (0.0, round(5 / 6, 3))
    assert lead_runs({"spans": [_span("  ", "Times-Bold")]}) == (0.0, 0.0)
