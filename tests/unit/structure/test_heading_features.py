"""Row features of the learned section filter that read the whole document: running heads
that carry a changing page number, parts, front and back matter by name."""

from __future__ import annotations

from pathlib import Path

import pymupdf

from bookindex.operators.parsing.parse import parse_pages
from bookindex.operators.structure.blocks import classify_blocks
from bookindex.operators.structure.heading_features import (
    FEATURE_NAMES,
    candidate_features,
    heading_pool,
    pool_decisions,
    running_shape,
)
from bookindex.operators.structure.sections import (
    LayoutSectionFilter,
    SectionContext,
    candidates_of,
)
from tests.conftest import missing_shared_data
from tests.unit.structure.test_heading_rules import _mmlongbench


def test_running_shape_drops_the_page_number_at_either_end():
    assert running_shape("A. Project Summary 8") == running_shape("A. Project Summary 10")
    assert running_shape("xiv Preface") == running_shape("Preface xv") == "preface"
    assert running_shape("Chapter 2: Country Studies") == "chapter #  country studies".replace(
        "  ", " "
    )
    assert running_shape("12") == ""


def _features(pdf: Path, first: int, last: int):
    with pymupdf.open(str(pdf)) as doc:
        blocks = parse_pages(doc, first, last).blocks
    n_pages = last - first
    body = classify_blocks(blocks, n_pages)
    ctx = SectionContext(body=body, n_pages=n_pages, outline=[], blocks=blocks)
    cands = candidates_of(blocks)
    layout = LayoutSectionFilter().decide(cands, ctx)
    pool = heading_pool(cands, blocks)
    feats = candidate_features(pool.members, ctx, pool_decisions(pool, layout.decisions))
    return pool.members, feats.x


def test_running_heads_with_a_page_number_repeat_at_the_same_height(shared_data):
    """consumer-data prints "A. Consumer Data Protection in Brazil 14", "... 16", ... at the top
    of every other page, below the furniture margin: running heads (furniture since
    ``furniture._mark_deep_running_heads``; its own test: test_running_heads.py), so no row of
    the filter; the heading they repeat (page 19, PDF page 20) is a row, not at their height,
    and "I. Introduction" does not repeat."""
    pdfs = sorted((shared_data / "hips_extra" / "PDFs").glob("consumer-data-protection*.pdf"))
    if not pdfs:
        missing_shared_data("consumer-data book not in the shared data")
    members, x = _features(pdfs[0], 18, 32)
    same_y = FEATURE_NAMES.index("repeat_same_y")
    near = FEATURE_NAMES.index("repeat_near")
    named = [k for k, c in enumerate(members) if c.text.startswith("A. Consumer Data Protection")]
    assert named and all(members[k].page == 19 for k in named)
    assert all(x[k, same_y] == 0 for k in named)
    intro = [k for k, c in enumerate(members) if c.text.strip() == "I. Introduction"]
    assert intro and all(x[k, same_y] == 0 and x[k, near] == 0 for k in intro)


def _book(shared_data: Path, prefix: str) -> Path:
    pdfs = sorted((shared_data / "hips_extra" / "PDFs").glob(f"{prefix}*.pdf"))
    if not pdfs:
        missing_shared_data(f"{prefix} book not in the shared data")
    return pdfs[0]


def test_bold_or_italic_lead_in_is_a_column_and_a_style_of_its_own(shared_data):
    """basic-income-tax sets its case headings as a bold case name before a roman citation and
    "Notes and Questions" in italic before a roman colon (gold headings the filter missed while
    they read as body face): the rows carry the lead-in's share, and their style key
    (``heading_context.row_style``, which the second stage and the level consensus group by)
    is not the body's."""
    from bookindex.operators.structure.heading_context import row_style

    members, x = _features(_book(shared_data, "basic-income-tax"), 64, 72)
    lead_bold = FEATURE_NAMES.index("lead_bold")
    lead_italic = FEATURE_NAMES.index("lead_italic")
    case = [k for k, c in enumerate(members) if c.text.startswith("Commissioner v. Glenshaw")]
    notes = [k for k, c in enumerate(members) if c.text.lower().startswith("notes and questions")]
    assert case and notes
    assert all(0.5 < x[k, lead_bold] < 0.8 for k in case)
    assert all(x[k, lead_italic] > 0.9 and x[k, lead_bold] == 0 for k in notes)
    plain = [k for k in range(len(members)) if x[k, lead_bold] == 0 and x[k, lead_italic] == 0]
    plain_styles = {row_style(x[k]) for k in plain}
    assert row_style(x[case[0]]) not in plain_styles
    assert row_style(x[notes[0]]) not in plain_styles


def test_a_label_set_apart_on_the_left_starts_the_heading(shared_data):
    """purpose-limitation sets "a)" apart on the left of a body-face heading ("Coming from a
    practical observation: …", p. 36), a block of its own on the same line
    (``blocks.join_hanging_labels``): the heading reads "a) Coming from …", numbered, and no
    bare label is left as a candidate of its own; the paragraph under it keeps its text."""
    members, x = _features(_book(shared_data, "the-principle-of-purpose-limitation"), 33, 37)
    letter = FEATURE_NAMES.index("letter_label")
    heading = [k for k, c in enumerate(members) if "Coming from a practical" in c.text]
    assert len(heading) == 1 and members[heading[0]].text.startswith("a) Coming from")
    assert x[heading[0], letter] > 0
    assert not [c for c in members if c.text.strip() in ("a)", "b)", "3.")]


def test_indentation_is_measured_from_the_body_column_not_the_page(shared_data):
    """8dfc21ec (printed web pages) sets its text in a column that starts at 0.3 of the page
    width; its 9.2 pt bold sub-heads are flush with that column, so they sit at its left edge
    (``x0_rel`` 0), where a book's flush headings sit, not 0.3 in from it."""
    members, x = _features(_mmlongbench(shared_data, "8dfc21ec151fb9d3578fc32d5c4e5df9.pdf"), 0, 2)
    x0 = FEATURE_NAMES.index("x0_rel")
    heads = [k for k, c in enumerate(members) if c.bold and round(c.font_size, 1) == 9.2]
    assert len(heads) >= 5, [c.text for c in members]
    assert all(abs(x[k, x0]) < 0.01 for k in heads), [(members[k].text, x[k, x0]) for k in heads]


def test_each_column_of_a_two_column_page_is_its_own_margin(shared_data):
    """An ACL paper sets its numbered section heads flush with the left of either column
    (0.12 or 0.51 of the page width; "2 Related Work", "3 PROGRAMFC", "3.1" and "3.4" open
    the right-hand column): both read as flush (``x0_rel`` near 0); "Abstract",
    centred over the left column, is centred (``centre_off`` near 0), and the title centred
    over the page too."""
    members, x = _features(_mmlongbench(shared_data, "2023.acl-long.386.pdf"), 0, 6)
    x0, centre = FEATURE_NAMES.index("x0_rel"), FEATURE_NAMES.index("centre_off")
    numbered = [
        k
        for k, c in enumerate(members)
        if c.text.startswith(("2 Related Work", "3 PROGRAMFC", "3.1 ", "3.3 ", "3.4 ", "4.1 "))
    ]
    assert len(numbered) == 6, [c.text for c in members]
    assert all(abs(x[k, x0]) < 0.01 for k in numbered)
    abstract = [k for k, c in enumerate(members) if c.text.strip() == "Abstract"]
    title = [k for k, c in enumerate(members) if c.text.startswith("Fact-Checking Complex")]
    assert abstract and title
    assert x[abstract[0], centre] < 0.01 and x[title[0], centre] < 0.01
    assert x[abstract[0], x0] > 0.1  # set in from the column's edge, not flush


def test_a_run_of_short_lines_in_one_type_is_counted_a_heading_stands_alone(
    shared_data, sample_corpus
):
    """``short_run``: sample_03's "Same as a == b." and its 20-odd siblings, one-line entries in
    the body face in a row, count a full run (the cap) — stop 10's first model kept 43 of them
    as headings; basic-income-tax's case heading, a bold case name before its roman citation,
    stands alone in its type though the court's opening line under it is a short line too,
    and so does "Notes and questions:" before its numbered paragraphs."""
    from bookindex.operators.structure.heading_features import SHORT_RUN_CAP, short_runs

    with pymupdf.open(str(sample_corpus / "sample_03.pdf")) as doc:
        blocks = parse_pages(doc, 4, 6).blocks
    classify_blocks(blocks, 2)
    runs = short_runs(blocks)
    same = [i for i, b in enumerate(blocks) if b.text.startswith("Same as a ")]
    assert len(same) > 20 and all(runs[i] >= SHORT_RUN_CAP - 2 for i in same)
    assert sum(runs[i] == SHORT_RUN_CAP for i in same) > 20
    assert all(runs[i] == 1 for i, b in enumerate(blocks) if b.text.startswith("1.3"))

    members, x = _features(_book(shared_data, "basic-income-tax"), 52, 53)
    run = FEATURE_NAMES.index("short_run")
    case = [k for k, c in enumerate(members) if c.text.startswith("Eisner v. Macomber")]
    justice = [k for k, c in enumerate(members) if c.text.startswith("MR. JUSTICE PITNEY")]
    assert case and justice
    assert x[case[0], run] == 1 and x[justice[0], run] > 1
