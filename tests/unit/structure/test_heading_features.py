"""Row features of the learned section filter that read the whole document: running heads
that carry a changing page number, parts, front and back matter by name."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from operators.parsing.parse import parse_pages
from operators.structure.blocks import classify_blocks
from operators.structure.heading_features import (
    FEATURE_NAMES,
    candidate_features,
    heading_pool,
    pool_decisions,
    running_shape,
)
from operators.structure.sections import LayoutSectionFilter, SectionContext, candidates_of


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
    of every other page, below the furniture margin; the heading it repeats (page 19, PDF
    page 20) is not at that height, and "I. Introduction" does not repeat."""
    pdfs = sorted((shared_data / "hips_extra" / "PDFs").glob("consumer-data-protection*.pdf"))
    if not pdfs:
        pytest.skip("consumer-data book not in the shared data")
    members, x = _features(pdfs[0], 18, 32)
    same_y = FEATURE_NAMES.index("repeat_same_y")
    near = FEATURE_NAMES.index("repeat_near")
    named = [k for k, c in enumerate(members) if c.text.startswith("A. Consumer Data Protection")]
    heads = [k for k in named if members[k].page >= 20]
    assert len(heads) >= 5, [c.text for c in members][:40]
    assert all(x[k, same_y] >= 3 and x[k, near] >= 1 for k in heads)
    assert all(x[k, same_y] == 0 for k in named if members[k].page == 19)
    intro = [k for k, c in enumerate(members) if c.text.strip() == "I. Introduction"]
    assert intro and all(x[k, same_y] == 0 and x[k, near] == 0 for k in intro)
